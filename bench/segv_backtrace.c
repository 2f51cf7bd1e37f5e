/* A native backtrace at a crash, without a debugger (bench/python_swap.sh run):
 *   cc -shared -fPIC -O1 -o segv_backtrace.so bench/segv_backtrace.c
 *   LD_PRELOAD=$PWD/segv_backtrace.so python3 ...
 * On SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT it writes the signal, the
 * faulting address, the frames (glibc's backtrace: file(+offset) [address])
 * and /proc/self/maps to stderr, then dies of the signal as it would have.
 * bench/python_swap_probe.py --symbolize turns the frames into functions and
 * lines: libraries loaded through /proc/self/fd/N (model.so) are named there
 * by their real file in the maps.
 * Python's faulthandler, where enabled, runs first and chains to this. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void put(const char *s) { (void)!write(2, s, strlen(s)); }

static void onFatal(int sig, siginfo_t *info, void *context) {
  (void)context;
  char line[160];
  snprintf(line, sizeof line, "\n=== segv_backtrace: signal %d (%s) at address %p, pid %d\n", sig,
           strsignal(sig), info ? info->si_addr : NULL, (int)getpid());
  put(line);
  void *frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  put("=== /proc/self/maps\n");
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd >= 0) {
    char buffer[4096];
    ssize_t got;
    while ((got = read(fd, buffer, sizeof buffer)) > 0)
      (void)!write(2, buffer, (size_t)got);
    close(fd);
  }
  put("=== end of segv_backtrace\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  static char stack[1 << 16]; /* a stack overflow still gets its report */
  stack_t alt = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
  sigaltstack(&alt, NULL);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = onFatal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (unsigned i = 0; i < sizeof signals / sizeof *signals; ++i)
    sigaction(signals[i], &action, NULL);
  void *warm[1];
  backtrace(warm, 1); /* loads libgcc_s now, not inside the handler */
}
