"""Regenerate the built-in workload profiles from the published architecture definitions.

Run ``python sim/profiles/make_profiles.py`` from the repository root. Every parameter count is
computed here from the architecture (layer shapes as in the original papers / the torchvision and
Hugging Face reference implementations); the totals are checked against the well-known figures
before anything is written.

Compute times are *derived*, not measured: forward FLOPs per sample are counted per layer
(2 x multiply-accumulates for convolutions and matrix products, a few FLOPs per element for
normalisation), multiplied by the reference batch, and divided by a nominal sustained throughput
of a V100-class device (15.7 TFLOP/s FP32 peak at 40 % utilisation = 6.28e12 FLOP/s). Backward is
taken as 2 x forward (gradients with respect to inputs and to weights). The optimizer step is
SGD with momentum, memory bound: 16 bytes moved per parameter at 900 GB/s. Each layer's
``compute_weight`` is its forward FLOPs per sample; the simulator spreads backward time over the
layers in that proportion to decide when each gradient bucket is ready. Use ``--compute-scale``
to model a faster or slower device.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["build", "main"]

OUT_DIR = Path(__file__).parent
THROUGHPUT_FLOPS = 15.7e12 * 0.4
HBM_Bps = 900e9
DEVICE = "nominal V100-class GPU, FP32, 6.28e12 FLOP/s sustained (15.7 TFLOP/s peak x 0.4)"

Layer = tuple[str, int, float]  # name, params, forward FLOPs per sample


def _conv(name: str, cin: int, cout: int, k: int, hw_out: int, bias: bool) -> Layer:
    params = k * k * cin * cout + (cout if bias else 0)
    return name, params, 2.0 * k * k * cin * cout * hw_out * hw_out


def _bn(name: str, c: int, hw: int) -> Layer:
    return name, 2 * c, 4.0 * c * hw * hw


def _linear(name: str, fin: int, fout: int, tokens: int = 1, bias: bool = True) -> Layer:
    return name, fin * fout + (fout if bias else 0), 2.0 * fin * fout * tokens


def resnet50() -> list[Layer]:
    """ResNet-50 v1.5 (torchvision): stride on the 3x3 conv of each bottleneck."""
    layers: list[Layer] = [_conv("conv1", 3, 64, 7, 112, False), _bn("bn1", 64, 112)]
    cin, hw = 64, 56
    for stage, (width, blocks, stride) in enumerate(
        [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1
    ):
        for b in range(blocks):
            s = stride if b == 0 else 1
            out_hw = hw // s
            p = f"layer{stage}.{b}"
            layers += [
                _conv(f"{p}.conv1", cin, width, 1, hw, False),
                _bn(f"{p}.bn1", width, hw),
                _conv(f"{p}.conv2", width, width, 3, out_hw, False),
                _bn(f"{p}.bn2", width, out_hw),
                _conv(f"{p}.conv3", width, 4 * width, 1, out_hw, False),
                _bn(f"{p}.bn3", 4 * width, out_hw),
            ]
            if b == 0:
                layers += [
                    _conv(f"{p}.downsample.0", cin, 4 * width, 1, out_hw, False),
                    _bn(f"{p}.downsample.1", 4 * width, out_hw),
                ]
            cin, hw = 4 * width, out_hw
    layers.append(_linear("fc", 2048, 1000))
    return layers


def vgg16() -> list[Layer]:
    """VGG-16 (configuration D, torchvision, without batch norm), 224x224 input."""
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers: list[Layer] = []
    cin, hw, idx = 3, 224, 0
    for v in cfg:
        if v == "M":
            hw //= 2
        else:
            assert isinstance(v, int)
            layers.append(_conv(f"features.{idx}", cin, v, 3, hw, True))
            cin = v
        idx += 1 if v == "M" else 2  # torchvision indexes conv, relu, (pool)
    layers += [
        _linear("classifier.0", 512 * 7 * 7, 4096),
        _linear("classifier.3", 4096, 4096),
        _linear("classifier.6", 4096, 1000),
    ]
    return layers


def lstm_ptb(vocab: int = 10000, hidden: int = 1500, n_layers: int = 2) -> list[Layer]:
    """Zaremba et al. (2014) 'large' PTB language model; FLOPs per token."""
    layers: list[Layer] = [("encoder", vocab * hidden, 0.0)]
    for i in range(n_layers):
        params = 4 * hidden * (hidden + hidden) + 8 * hidden  # torch: bias_ih and bias_hh
        layers.append((f"rnn.l{i}", params, 2.0 * 4 * hidden * (2 * hidden)))
    layers.append(_linear("decoder", hidden, vocab))
    return layers


def bert_base(seq: int = 128) -> list[Layer]:
    """BERT-base uncased (BertModel with pooler); FLOPs per token at sequence length ``seq``."""
    d, ff, vocab = 768, 3072, 30522
    layers: list[Layer] = [
        ("embeddings.word_embeddings", vocab * d, 0.0),
        ("embeddings.position_embeddings", 512 * d, 0.0),
        ("embeddings.token_type_embeddings", 2 * d, 0.0),
        ("embeddings.LayerNorm", 2 * d, 5.0 * d),
    ]
    for i in range(12):
        p = f"encoder.layer.{i}"
        q = _linear(f"{p}.attention.self.query", d, d)
        # The score and context products (2 x seq x d each) are charged to the query entry.
        layers += [
            (q[0], q[1], q[2] + 4.0 * seq * d),
            _linear(f"{p}.attention.self.key", d, d),
            _linear(f"{p}.attention.self.value", d, d),
            _linear(f"{p}.attention.output.dense", d, d),
            (f"{p}.attention.output.LayerNorm", 2 * d, 5.0 * d),
            _linear(f"{p}.intermediate.dense", d, ff),
            _linear(f"{p}.output.dense", ff, d),
            (f"{p}.output.LayerNorm", 2 * d, 5.0 * d),
        ]
    layers.append(_linear("pooler.dense", d, d))
    return layers


def gpt2_small(seq: int = 1024) -> list[Layer]:
    """GPT-2 small (124M; LM head tied to wte); FLOPs per token at context ``seq``."""
    d, vocab = 768, 50257
    layers: list[Layer] = [("wte", vocab * d, 0.0), ("wpe", 1024 * d, 0.0)]
    for i in range(12):
        p = f"h.{i}"
        qkv = _linear(f"{p}.attn.c_attn", d, 3 * d)
        layers += [
            (f"{p}.ln_1", 2 * d, 5.0 * d),
            (qkv[0], qkv[1], qkv[2] + 4.0 * seq * d),  # plus causal attention products
            _linear(f"{p}.attn.c_proj", d, d),
            (f"{p}.ln_2", 2 * d, 5.0 * d),
            _linear(f"{p}.mlp.c_fc", d, 4 * d),
            _linear(f"{p}.mlp.c_proj", 4 * d, d),
        ]
    layers.append(("ln_f", 2 * d, 5.0 * d))
    # The tied LM head owns no parameters of its own, but its backward runs first.
    layers.append(("lm_head", 0, 2.0 * d * vocab))
    return layers


def tiny() -> list[Layer]:
    """A three-layer toy for tests: 1 MB of gradients with one 0.8 MB layer."""
    return [("embed", 50_000, 1.0e6), ("hidden", 200_000, 4.0e6), ("head", 0, 0.0)]


SPECS = {
    # name: (builder, expected total params, samples per iteration, per-sample unit, description)
    "resnet50": (resnet50, 25_557_032, 32, "image 224x224", "ResNet-50 v1.5 on ImageNet"),
    "vgg16": (vgg16, 138_357_544, 32, "image 224x224", "VGG-16 on ImageNet"),
    "lstm-ptb": (
        lstm_ptb,
        66_034_000,
        20 * 35,
        "token (batch 20 x 35 steps)",
        "2-layer LSTM language model, 1500 hidden, PTB vocabulary 10k (Zaremba 'large')",
    ),
    "bert-base": (
        bert_base,
        109_482_240,
        32 * 128,
        "token (batch 32 x 128)",
        "BERT-base uncased encoder with pooler, sequence length 128",
    ),
    "gpt2-small": (
        gpt2_small,
        124_439_808,
        8 * 1024,
        "token (batch 8 x 1024)",
        "GPT-2 small (124M), context 1024, tied LM head",
    ),
}


def build(name: str) -> dict[str, object]:
    """The JSON document of profile ``name``."""
    if name == "tiny":
        layers = tiny()
        return {
            "name": "tiny",
            "description": "Toy profile for tests: three layers, 250k parameters.",
            "device": "cpu",
            "reference": {"how": "synthetic; compute times chosen for tests"},
            "forward_s": 0.001,
            "backward_s": 0.002,
            "optimizer_s": 0.0001,
            "layers": [{"name": n, "params": p, "compute_weight": w} for n, p, w in layers],
        }
    builder, expected, samples, unit, desc = SPECS[name]
    layers = builder()
    total = sum(p for _, p, _ in layers)
    if total != expected:
        raise SystemExit(f"{name}: counted {total} parameters, expected {expected}")
    fwd_flops = sum(w for _, _, w in layers) * samples
    forward_s = fwd_flops / THROUGHPUT_FLOPS
    return {
        "name": name,
        "description": desc,
        "device": "gpu",
        "reference": {
            "device": DEVICE,
            "batch": f"{samples} x {unit} per worker",
            "how": "derived: counted forward FLOPs / sustained throughput; backward = 2 x "
            "forward; optimizer = 16 B/param at 900 GB/s (see sim/profiles/make_profiles.py)",
            "forward_flops_per_iteration": fwd_flops,
        },
        "forward_s": forward_s,
        "backward_s": 2.0 * forward_s,
        "optimizer_s": 16.0 * total / HBM_Bps,
        "layers": [{"name": n, "params": p, "compute_weight": w} for n, p, w in layers],
    }


def main() -> None:
    """Write every profile next to this script."""
    for name in ["tiny", *SPECS]:
        doc = build(name)
        (OUT_DIR / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
