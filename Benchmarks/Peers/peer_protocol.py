"""The request loop every MiniLM peer of PeerBenchmark serves (see onnxruntime_minilm.py for the
protocol): one JSON request per line on stdin, one JSON answer per line on stdout."""
import json
import sys
import time

import numpy as np
from safetensors.numpy import load_file


def feed(batch):
    """Token id lists padded into `input_ids` and `attention_mask` [batch, longest] (int64)."""
    longest = max(len(sequence) for sequence in batch)
    ids = np.zeros((len(batch), longest), np.int64)
    mask = np.zeros_like(ids)
    for row, sequence in enumerate(batch):
        ids[row, :len(sequence)], mask[row, :len(sequence)] = sequence, 1
    return {"input_ids": ids, "attention_mask": mask}


def serve(ready, runner, on_workload=lambda workload: {}):
    """Prints `ready`, then answers requests; `runner(variant, threads)` returns a function from
    feeds to the [batch, hidden] embeddings; `on_workload` sees each loaded workload first and
    returns what to add to the answer."""
    print(json.dumps(ready), flush=True)
    workload = {}
    for line in sys.stdin:
        request = json.loads(line)
        if "workload" in request:
            workload = json.load(open(request["workload"]))
            extra = on_workload(workload)
            print(json.dumps({"loaded": sorted(workload), **extra}), flush=True)
            continue
        run = runner(request["variant"], request["threads"])
        inputs = workload[request["inputs"]]
        if request["run"] == "batch1":
            times = []
            for sequence in inputs:
                feeds = feed([sequence])
                start = time.perf_counter()
                run(feeds)
                times.append((time.perf_counter() - start) * 1e3)
            print(json.dumps({"milliseconds": times}), flush=True)
        elif request["run"] == "batch32":
            batches = [feed(inputs[i:i + 32]) for i in range(0, len(inputs), 32)]
            start = time.perf_counter()
            for feeds in batches:
                run(feeds)
            print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)
        else:
            embeddings = np.concatenate([run(feed([sequence])) for sequence in inputs]).astype(np.float64)
            reference = load_file(request["reference"])["embeddings"].astype(np.float64)[:len(embeddings)]
            cosines = (embeddings * reference).sum(1) / np.linalg.norm(embeddings, axis=1) / np.linalg.norm(reference, axis=1)
            print(json.dumps({"mean_cosine": float(cosines.mean()), "min_cosine": float(cosines.min())}), flush=True)
