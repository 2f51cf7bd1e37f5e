// bench/gpu_clocks.py: a timed loop's SM clock, power and throttle reasons are
// the samples taken inside its span(s): the median and lowest clock, the median
// power, and every throttle reason NVML reported in any of them. Samples outside
// the spans do not count; a span with no sample gives nothing. Without NVML the
// sampler says why and records nothing (the benchmark then records no clocks).

// RUN: rm -rf %t && split-file %s %t && %python %t/check.py %moec_src/bench | FileCheck %s

// CHECK: one span: {'mhz': 1500, 'mhz_min': 1410, 'watts': 700.0, 'samples': 3, 'throttle': ['power-cap']}
// CHECK-NEXT: two spans: {'mhz': 1980, 'mhz_min': 1410, 'watts': 700.0, 'samples': 4, 'throttle': ['power-cap', 'sw-thermal']}
// CHECK-NEXT: empty span: {}
// CHECK-NEXT: no NVML: error recorded True samples []

//--- check.py
import sys

sys.path.insert(0, sys.argv[1])
import gpu_clocks  # noqa: E402

sampler = gpu_clocks.ClockSampler.__new__(gpu_clocks.ClockSampler)  # no thread, no NVML
sampler.error = None
# (time, SM MHz, watts, throttle bits): 0x4 power cap, 0x20 software thermal.
sampler.samples = [(0.5, 1980, 100.0, 0), (1.0, 1500, 700.0, 0x4), (1.5, 1410, 705.0, 0x4),
                   (2.0, 1650, 600.0, 0), (3.0, 1980, 500.0, 0x20), (3.5, 1980, 200.0, 0),
                   (9.0, 1000, 50.0, 0x40)]
print("one span:", sampler.window(1.0, 2.0))
print("two spans:", sampler.windows([(1.0, 1.5), (3.0, 3.5), (4.0, 5.0)]))
print("empty span:", sampler.window(5.0, 6.0))

# Where libnvidia-ml cannot be opened or initialised the sampler records nothing.
gpu_clocks.ctypes.CDLL = lambda name: (_ for _ in ()).throw(OSError(name + ": not here"))
absent = gpu_clocks.ClockSampler()
print("no NVML: error recorded", absent.error is not None, "samples", absent.samples)
absent.close()
