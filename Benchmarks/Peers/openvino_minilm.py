#!/usr/bin/env python3
"""OpenVINO and NNCF next to Shrink on all-MiniLM-L6-v2, driven by PeerBenchmark.

    openvino_minilm.py MODEL_FOLDER WORK_FOLDER

Converts (`ov.convert_model`) the fp32 ONNX graph onnxruntime_minilm.py builds from the same
safetensors, with weights as stored behind a Transpose, so that linears become MatMuls with
transpose_b, the form NNCF's GPTQ takes; and serves the same requests (see that file) for three variants, each one synchronous request on the CPU plugin
with NUM_STREAMS=1 and INFERENCE_NUM_THREADS=threads:
- "fp32": the graph as is, INFERENCE_PRECISION_HINT=f32 (the plugin's default on CPUs with BF16
  would compute in bf16);
- "w8a8": static int8 weights and activations by `nncf.quantize` (transformer model type),
  calibrated on the workload's "calibration" token ids;
- "int4": `nncf.compress_weights` INT4_ASYM in groups of 32 over every layer (`all_layers`, the
  embeddings included, ratio 1), with AWQ, scale estimation and GPTQ on the same calibration data.
The quantized variants keep the plugin's default inference precision, as a user would run them.
Needs: python3 -m pip install -r scripts/requirements-peers.txt
"""
import logging
import os
import sys
import time

import nncf
import openvino as ov

from onnxruntime_minilm import fp32_graph
from peer_protocol import feed, serve


def main():
    folder, work = sys.argv[1], sys.argv[2]
    core = ov.Core()
    graph = fp32_graph(folder, work, transposed_matmuls=True)
    models, compiled, preparation = {"fp32": ov.convert_model(graph)}, {}, {}

    def prepare(workload):
        if "w8a8" in models:
            return {"preparation_seconds": preparation}
        # NNCF's progress bars go to standard output, which carries the protocol: send them to
        # standard error for the while.
        sys.stdout.flush()
        protocol = os.dup(1)
        os.dup2(2, 1)
        try:
            quantize(workload)
        finally:
            sys.stdout.flush()
            os.dup2(protocol, 1)
            os.close(protocol)
        return {"preparation_seconds": preparation}

    def quantize(workload):
        logging.disable(logging.WARNING)
        nncf.set_log_level(logging.ERROR)
        dataset = nncf.Dataset([feed([sequence]) for sequence in workload["calibration"]])
        start = time.perf_counter()
        models["w8a8"] = nncf.quantize(ov.convert_model(graph), dataset, model_type=nncf.ModelType.TRANSFORMER,
                                       subset_size=len(workload["calibration"]))
        preparation["w8a8"] = time.perf_counter() - start
        start = time.perf_counter()
        models["int4"] = nncf.compress_weights(ov.convert_model(graph), mode=nncf.CompressWeightsMode.INT4_ASYM,
                                               group_size=32, ratio=1.0, all_layers=True, dataset=dataset, awq=True,
                                               scale_estimation=True, gptq=True, subset_size=len(workload["calibration"]))
        preparation["int4"] = time.perf_counter() - start

    def runner(variant, threads):
        key = (variant, threads)
        if key not in compiled:
            config = {"NUM_STREAMS": "1", "INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY"}
            if variant == "fp32":
                config["INFERENCE_PRECISION_HINT"] = "f32"
            request = core.compile_model(models[variant], "CPU", config).create_infer_request()
            compiled[key] = lambda feeds: request.infer(feeds)["embedding"].copy()
        return compiled[key]

    serve({"ready": ["fp32", "w8a8", "int4"], "openvino": ov.get_version(), "nncf": nncf.__version__}, runner, prepare)


if __name__ == "__main__":
    main()
