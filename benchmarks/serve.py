"""fastreid-serve under load: requests/s and p50 / p99 latency of searches at 1, 4, 16 and 64
concurrent clients, with dynamic batching on (``--max-batch 16``) and off (``--max-batch 1``: one
query per forward), side by side in one run.

Builds (once, in ``--work``) a synthetic Market-1501 whose gallery has ~1,300 images, a randomly
initialised ResNet-18 (``--model r18``: 256x128 input, what a deployment runs; ``--model tiny``: the
tests' 64x32) and the gallery's features (fastreid-extract). Starts the two servers as the command
runs them (``python -m fastreid.cli.serve --features ...``, each in its own process, both idle but
the one measured), then drives them from this process with a small asyncio HTTP/1.1 client (one
keep-alive connection per client, the synthetic query images in turn). Each point alternates off
and on ``--rounds`` times (6) for ``--seconds`` each (4), short windows so that both see the same
machine load (on a shared machine two identical servers measured 10 s each differed by up to 1.8x);
the load average is printed beside each point. Every answer must be a 200 whose results are non-empty.
First, the model alone gives batching's ceiling: 16 searches one by one against one batch of 16.

    python benchmarks/serve.py                       # R18 at 256x128
    python benchmarks/serve.py --model tiny --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fastreid.utils.threads import configure_openmp  # noqa: E402  (after the checkout is on sys.path)

configure_openmp()  # before torch loads: the servers' own setting (fastreid-serve makes the same call)

BOUNDARY = "fastreid-bench-boundary"
SIZES = {"r18": (256, 128), "tiny": (64, 32)}


def prepare(work: str, model: str) -> tuple[str, str, list[bytes]]:
    """``(run folder, features folder, query images)`` in ``work``, made once."""
    import torch

    from fastreid.cli import extract
    from fastreid.config import get_cfg
    from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501
    from fastreid.modeling import build_model

    data = os.path.join(work, "datasets")
    market = os.path.join(data, "Market-1501-v15.09.15")
    if not os.path.isdir(os.path.join(market, "bounding_box_test")):
        print("generating the synthetic Market-1501 (gallery ~1,300 images) ...", flush=True)
        generate_market1501(data, SyntheticSpec(num_train_ids=4, seed=0))
    run = os.path.join(work, f"run_{model}")
    if not os.path.isfile(os.path.join(run, "model_final.pth")):
        os.makedirs(run, exist_ok=True)
        cfg = get_cfg()
        cfg.merge_from_file(os.path.join(ROOT, "configs", "Demo", "bagtricks_demo.yml"))
        height, width = SIZES[model]
        cfg.merge_from_list(["MODEL.HEADS.NUM_CLASSES", 100, "INPUT.SIZE_TEST", [height, width],
                             "INPUT.SIZE_TRAIN", [height, width], "DATALOADER.NUM_THREADS", 0])  # fmt: skip
        torch.manual_seed(0)
        built = build_model(cfg, log_summary=False)
        with open(os.path.join(run, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(cfg.dump())
        torch.save({"model": built.state_dict()}, os.path.join(run, "model_final.pth"))
    feats = os.path.join(work, f"feats_{model}")
    if not os.path.isfile(os.path.join(feats, "features.npy")):
        print(f"extracting the gallery's features with the {model} model ...", flush=True)
        code = extract.run(["--config-file", os.path.join(run, "config.yaml"),
                            "--input", os.path.join(market, "bounding_box_test"), "--output", feats,
                            "--device", "cpu", "MODEL.WEIGHTS", os.path.join(run, "model_final.pth")])  # fmt: skip
        if code:
            sys.exit(code)
    query = os.path.join(market, "query")
    queries = []
    for name in sorted(os.listdir(query))[:64]:
        with open(os.path.join(query, name), "rb") as f:
            queries.append(f.read())
    return run, feats, queries


def forward_ceiling(run: str, feats: str, queries: list[bytes], repeats: int = 3) -> tuple[float, float]:
    """What batching can gain at most: the time of 16 searches one by one over the time of the
    same 16 as one batch (``Gallery.search_batch``: forward and index search), in this process with
    the servers' torch threads, before the servers start; and the one-by-one searches per second."""
    import torch

    from fastreid.inference import FeatureExtractor
    from fastreid.serve import Gallery, decode_upload

    extractor = FeatureExtractor(
        os.path.join(run, "config.yaml"), os.path.join(run, "model_final.pth"), device="cpu"
    )
    gallery = Gallery.build(extractor, features=feats)
    images = [gallery.preprocess(decode_upload(q)) for q in queries[:16]]
    batch = torch.cat(images)
    gallery.search_batch(batch, [10] * 16)
    alone = together = 0.0
    for _ in range(repeats):
        began = time.perf_counter()
        for image in images:
            gallery.search_batch(image, [10])
        alone += time.perf_counter() - began
        began = time.perf_counter()
        gallery.search_batch(batch, [10] * 16)
        together += time.perf_counter() - began
    return alone / together, 16 * repeats / alone


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    run: str, feats: str, max_batch: int, options: Sequence[str], cpus: str = ""
) -> tuple[subprocess.Popen, int]:
    """The command in a process of its own (on ``cpus`` only, when given) and its port."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "fastreid.cli.serve", "--model", run, "--features", feats,
               "--port", str(port), "--device", "cpu", "--max-batch", str(max_batch), *options]  # fmt: skip
    if cpus:
        command = ["taskset", "-c", cpus, *command]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while True:
        if process.poll() is not None:
            sys.exit(f"the server ({' '.join(command)}) exited with {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
            return process, port
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                sys.exit("the server did not answer within 300 s")
            time.sleep(0.3)


def search_request(image: bytes, port: int) -> bytes:
    body = (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="k"\r\n\r\n10\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="q.jpg"\r\n'
            "Content-Type: image/jpeg\r\n\r\n"
        ).encode()
        + image
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    head = (
        f"POST /search HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def client(port: int, requests: list[bytes], start: int, stop_at: float, latencies: list[float],
                 failures: list[str]) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = start
    try:
        while time.perf_counter() < stop_at:
            request = requests[i % len(requests)]
            i += 1
            began = time.perf_counter()
            try:
                writer.write(request)
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:])}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                failures.append(f"connection lost: {e!r}")
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            status = int(lines[0].split()[1])
            if status != 200 or b'"results":[{' not in body:
                failures.append(f"{status} {body[:120]!r}")
            else:
                latencies.append(time.perf_counter() - began)
            if headers.get("connection", "").lower() == "close":
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
    finally:
        writer.close()


async def drive(port: int, requests: list[bytes], concurrency: int, seconds: float) -> tuple[list[float], list[str], float]:  # fmt: skip
    latencies: list[float] = []
    failures: list[str] = []
    began = time.perf_counter()
    stop_at = began + seconds
    await asyncio.gather(
        *(client(port, requests, 7 * c, stop_at, latencies, failures) for c in range(concurrency))
    )
    return latencies, failures, time.perf_counter() - began


def cpu_description() -> str:
    """The CPU's model and the vector instructions the kernels may use."""
    import torch

    model, flags = "?", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16")
    shown = " ".join(f for f in wanted if f in flags) or "no AVX2"
    return f"{model} ({shown}; torch kernels: {torch.backends.cpu.get_cpu_capability()})"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return (
        ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(SIZES), default="r18")
    parser.add_argument("--work", default=os.path.join(ROOT, "logs", "bench_serve"), help="kept between runs")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="per measurement (each point has 2 x --rounds)"
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--server-cpus", default="", help="taskset CPU list for the servers (e.g. 0,1)")
    parser.add_argument("--prepare-only", action="store_true", help="make the data, model and features; stop")
    args = parser.parse_args()
    run, feats, queries = prepare(args.work, args.model)
    if args.prepare_only:
        return
    ceiling, alone_rate = forward_ceiling(run, feats, queries)
    options = ["--max-wait-ms", str(args.max_wait_ms), "--max-queue", "256"]
    servers = {
        "off": start_server(run, feats, 1, options, args.server_cpus),
        "on": start_server(run, feats, args.max_batch, options, args.server_cpus),
    }
    requests = {mode: [search_request(q, port) for q in queries] for mode, (_, port) in servers.items()}
    try:
        for mode, (_, port) in servers.items():  # warm up: first forwards, thread pools, caches
            asyncio.run(drive(port, requests[mode], 4, 2.0))
        with open(os.path.join(feats, "files.txt"), encoding="utf-8") as f:
            gallery = len(f.read().splitlines())
        print(
            f"\nfastreid-serve, {args.model} ({'x'.join(map(str, SIZES[args.model]))}), gallery "
            f"{gallery} images, batching on = --max-batch {args.max_batch} --max-wait-ms {args.max_wait_ms:g}"
        )
        print(f"CPU: {cpu_description()}; the servers on "
              f"{'CPUs ' + args.server_cpus if args.server_cpus else f'all {os.cpu_count()} CPUs'}, "
              f"this client on {sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}")  # fmt: skip
        print(
            f"The model alone (this process, before the servers started): 16 searches as one batch take "
            f"1/{ceiling:.2f} of their time one by one ({alone_rate:.1f} searches/s one by one): batching's ceiling"
        )
        print(f"{'clients':>7} {'batching':>8} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} "
              f"{'load avg':>9}  {'on/off req/s':>12} {'p99 on/off':>10}")  # fmt: skip
        for concurrency in args.concurrency:
            result: dict[str, tuple[list[float], list[str], float]] = {m: ([], [], 0.0) for m in servers}
            load = []
            for _ in range(args.rounds):
                for mode in ("off", "on"):
                    lat, fail, took = asyncio.run(
                        drive(servers[mode][1], requests[mode], concurrency, args.seconds)
                    )
                    result[mode][0].extend(lat)
                    result[mode][1].extend(fail)
                    result[mode] = (result[mode][0], result[mode][1], result[mode][2] + took)
                    load.append(os.getloadavg()[0])
            rates = {m: len(r[0]) / r[2] for m, r in result.items()}
            p99 = {m: percentile(r[0], 99) * 1000 for m, r in result.items()}
            for mode in ("off", "on"):
                lat, fail, _ = result[mode]
                ratio = (
                    f"{rates['on'] / rates['off']:>11.2f}x {p99['on'] / p99['off']:>9.2f}x"
                    if mode == "on"
                    else ""
                )
                print(f"{concurrency:>7} {mode:>8} {rates[mode]:>7.1f} {percentile(lat, 50) * 1000:>8.0f} "
                      f"{p99[mode]:>8.0f} {len(fail):>6} {sum(load) / len(load):>9.2f}  {ratio}", flush=True)  # fmt: skip
                if fail:
                    print(f"        e.g. {fail[0]}")
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGINT)
        for process, _ in servers.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    main()
