"""SM clock, power and clock-event reasons while an fp8 GEMM runs back to back: how far the GPU clocks down
under sustained tensor-core load, and how much of the peak at that clock each kernel reaches.

    python bench/fp8_gemm_clocks.py BUILD.so MxNxK[,MxNxK...] [--seconds 2] [--json OUT]

Per shape and side (kforge fast, cuBLAS blockwise, kforge strict, cuBLAS bf16 without scales; K-major
inputs), while `nvidia-smi` samples every 20 ms: first the benchmark's own do_bench timing (L2 flushed before
each launch), then launches back to back for --seconds without flushes (the steady state of a long run).
Reports µs per call (CUDA events over the whole window), TFLOPS, the median SM clock and power of the
samples after the first 0.3 s, the clock-event reasons seen, and the fraction of the dense tensor-core peak at
the measured clock (FP8: 8192 FLOP per clock per SM; 16-bit: 4096).
"""

import argparse
import functools
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm import cublas_fn, kernel_us, load_ops, make_inputs, seed_shape, tflops  # noqa: E402

FIELDS = "clocks.sm,power.draw,{reasons}.active,temperature.gpu"
FLOP_PER_CLOCK_PER_SM = {"fp8": 8192, "16-bit": 4096}
RAMP_S = 0.3


class Sampler:
    """nvidia-smi in the background; (host time, clock MHz, watts, reasons bitmask, °C) per sample."""

    def __init__(self):
        self.samples = []
        # drivers before 535 name the reasons "clocks_throttle_reasons"
        fields = FIELDS.format(reasons="clocks_event_reasons")
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"], capture_output=True)
        if probe.returncode != 0:
            fields = FIELDS.format(reasons="clocks_throttle_reasons")
        self.proc = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=subprocess.PIPE, text=True)  # fmt: skip
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                self.samples.append((time.perf_counter(), float(parts[0]), float(parts[1]), int(parts[2], 16),
                                     float(parts[3])))  # fmt: skip
            except (ValueError, IndexError):
                continue  # a header or an unsupported field's text

    def between(self, t0, t1):
        return [s for s in self.samples if t0 <= s[0] <= t1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def sustained(fn, seconds):
    """(µs per call, host start, host end) of `fn` launched back to back for about `seconds`."""
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    chunk = max(1, min(200, int(0.05 / max(time.perf_counter() - t, 1e-6))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.perf_counter()
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(chunk):
            fn()
        calls += chunk
        torch.cuda.synchronize()  # keeps the queue short, so the host window is the GPU's
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls, t0, time.perf_counter()


def summary(samples, shape, us, kind, sms):
    clocks = [s[1] for s in samples]
    mhz = statistics.median(clocks) if clocks else None
    reasons = 0
    for s in samples:
        reasons |= s[3]
    rec = dict(us=us, tflops=tflops(*shape, us), sm_mhz=mhz,
               sm_mhz_min=min(clocks) if clocks else None,
               watts=statistics.median(s[2] for s in samples) if samples else None,
               celsius=max(s[4] for s in samples) if samples else None,
               reasons=f"0x{reasons:x}", samples=len(samples))  # fmt: skip
    if mhz:
        rec["peak_fraction"] = rec["tflops"] * 1e12 / (FLOP_PER_CLOCK_PER_SM[kind] * sms * mhz * 1e6)
    return rec


def clock_shape(ops, sampler, shape, seconds, sms):
    """The four sides of one shape, each sustained for `seconds`; their records."""
    m, n, k = (int(v) for v in shape.split("x"))
    seed_shape(m, n, k)
    x = make_inputs(m, n, k, False)
    c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    # cuBLAS bf16: a plain bf16 product of the same size (no scales), the 16-bit anchor for strict mode.
    a16, b16 = x[0].to(torch.bfloat16), x[1].to(torch.bfloat16).t()
    sides = [("kforge fast", "fp8", functools.partial(ops.gemm, *x, c)), ("cuBLAS", "fp8", cublas_fn(*x)),
             ("kforge strict", "16-bit", functools.partial(ops.gemm_strict, *x, c)),
             ("cuBLAS bf16", "16-bit", functools.partial(torch.matmul, a16, b16, out=c))]  # fmt: skip
    records = []
    for label, kind, fn in sides:
        t0 = time.perf_counter()
        bench_us = kernel_us(fn)
        bench = summary(sampler.between(t0, time.perf_counter()), (m, n, k), bench_us, kind, sms)
        print(f"{shape:>16} {label:>13}: do_bench (L2 flushed) {bench_us:8.1f} us  SM {bench['sm_mhz']} MHz  "
              f"{bench['watts']} W  reasons {bench['reasons']}", flush=True)  # fmt: skip
        us, t0, t1 = sustained(fn, seconds)
        samples = sampler.between(t0 + RAMP_S, t1)
        rec = dict(M=m, N=n, K=k, side=label, **summary(samples, (m, n, k), us, kind, sms))
        rec["do_bench"] = bench
        records.append(rec)
        print(f"{shape:>16} {label:>13}: {us:8.1f} us {rec['tflops']:6.0f} TFLOPS  SM {rec['sm_mhz']} MHz "
              f"(min {rec['sm_mhz_min']})  {rec['watts']} W  {rec['celsius']} C  reasons {rec['reasons']}  "
              f"peak@clock {rec.get('peak_fraction', float('nan')):.2f}", flush=True)  # fmt: skip
        time.sleep(0.3)
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("so")
    ap.add_argument("shapes", help="MxNxK[,MxNxK...]")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    ops = load_ops(args.so)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sampler = Sampler()
    time.sleep(0.5)
    idle = sampler.between(0, time.perf_counter())
    print(f"idle: {statistics.median(s[1] for s in idle) if idle else '?'} MHz, "
          f"{statistics.median(s[2] for s in idle) if idle else '?'} W")  # fmt: skip
    try:
        shapes = args.shapes.split(",")
        records = [r for shape in shapes for r in clock_shape(ops, sampler, shape, args.seconds, sms)]
    finally:
        sampler.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(dict(so=args.so, sms=sms, records=records), indent=1))


if __name__ == "__main__":
    main()
