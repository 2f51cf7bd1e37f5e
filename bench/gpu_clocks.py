"""The GPU's SM clock, board power and throttle reasons, sampled while a benchmark runs.

The gap between a GEMM's rate in a profiled burst (743 TFLOP/s) and back to back in the
timed loop (~637) reads as the clock dropping under sustained load, which only a
recorded clock can confirm. This samples the clocks through NVML (libnvidia-ml, which every
driver ships; ctypes, no extra package) every few milliseconds on a thread, so that
each timed loop can report what the SM clock and the power were while it ran.

    sampler = ClockSampler()          # does nothing where NVML is missing
    t0 = time.perf_counter(); ...; t1 = time.perf_counter()
    sampler.window(t0, t1)            # {'mhz': median, 'mhz_min': ..., 'watts': median, 'throttle': [...]}

GPU index 0: the benchmark machines have one GPU (CUDA_VISIBLE_DEVICES is not mapped).
"""
import bisect
import ctypes
import threading
import time

# nvmlClocksEventReasons bits (nvml.h) worth naming in a table.
THROTTLE = {0x2: "app-clock", 0x4: "power-cap", 0x8: "hw-slowdown", 0x20: "sw-thermal",
            0x40: "hw-thermal", 0x80: "hw-power-brake"}


NVML_FI_DEV_POWER_INSTANT = 186  # nvml.h: the current power draw, mW


class FieldValue(ctypes.Structure):
    """nvmlFieldValue_t, for one unsigned value (the power field)."""
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class ClockSampler:
    def __init__(self, period_s=0.005):
        self.samples = []  # (perf_counter, sm MHz, watts, throttle bits)
        self.error = None
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            if nvml.nvmlInit_v2() != 0:
                raise OSError("nvmlInit_v2 failed")
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
                raise OSError("nvmlDeviceGetHandleByIndex_v2(0) failed")
        except (OSError, AttributeError) as e:
            self.error = repr(e)
            return
        self._nvml, self._handle, self._period = nvml, handle, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        nvml, h = self._nvml, self._handle
        mhz, bits = ctypes.c_uint(), ctypes.c_ulonglong()
        # The instantaneous power (NVML_FI_DEV_POWER_INSTANT): nvmlDeviceGetPowerUsage
        # averages over about a second, longer than a half-second timed loop, so it
        # reported the loop before (290 W for a loop held at the power cap).
        power = FieldValue(fieldId=NVML_FI_DEV_POWER_INSTANT)
        average = ctypes.c_uint()  # the fallback where a driver lacks the field
        while not self._stop.is_set():
            if nvml.nvmlDeviceGetFieldValues(h, 1, ctypes.byref(power)) == 0 and power.nvmlReturn == 0:
                mw = power.value
            elif nvml.nvmlDeviceGetPowerUsage(h, ctypes.byref(average)) == 0:
                mw = average.value
            else:
                mw = 0
            if nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h, ctypes.byref(bits)) != 0:
                bits.value = 0
            if nvml.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(mhz)) == 0:  # NVML_CLOCK_SM
                self.samples.append((time.perf_counter(), mhz.value, mw / 1e3, bits.value))
            time.sleep(self._period)

    def window(self, t0, t1):
        """Median and lowest SM clock, median power and the throttle reasons seen in [t0, t1]."""
        return self.windows([(t0, t1)])

    def windows(self, spans):
        """window() over several spans (t0, t1) together: the calls of interleaved rounds."""
        times = [s[0] for s in self.samples]
        inside = [s for t0, t1 in spans
                  for s in self.samples[bisect.bisect_left(times, t0):bisect.bisect_right(times, t1)]]
        if not inside:
            return {}
        mhz = sorted(s[1] for s in inside)
        watts = sorted(s[2] for s in inside)
        seen = 0
        for s in inside:
            seen |= s[3]
        return dict(mhz=mhz[len(mhz) // 2], mhz_min=mhz[0], watts=round(watts[len(watts) // 2], 1),
                    samples=len(inside),
                    throttle=[name for bit, name in THROTTLE.items() if seen & bit])

    def close(self):
        if self.error is None:
            self._stop.set()
            self._thread.join()
