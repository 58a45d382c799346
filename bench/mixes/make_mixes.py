#!/usr/bin/python3
"""Write the gradient-tensor mixes the fusion benchmark replays.

One file per model, bench/mixes/<mix>.txt: one line per gradient tensor, in
backward order (the reverse of parameter registration order: the last layer's
gradients are ready first), as

    <name> <dtype> <shape, dims joined by 'x'> <bytes>

after '#' header lines. bench/mixes/README.md describes the format.

The parameter shapes are computed here from the architectures' definitions,
so neither torchvision nor transformers (nor torch) is needed:

  resnet50     torchvision.models.resnet50() (ResNet v1.5, 1000 classes)
  bert-base    transformers.BertModel(bert-base-uncased config), with pooler
  mlp-10m      784-2048-2048-2048-10 multilayer perceptron (MNIST-sized)
  uniform-64k  200 float32 tensors of 64 KiB (the coordinator benchmark's mix)

The totals are checked against the published parameter counts (torchvision's
and Hugging Face's model cards). Where torch is importable, the same
architectures are also built as plain torch.nn modules, written the way
torchvision and transformers write them, and their named_parameters() must
match the computed lists name for name and shape for shape (--no-torch skips
that).

Usage: make_mixes.py [--out-dir DIR] [--check] [--no-torch]
  --check   write nothing; exit 1 if a file in DIR differs from what would be
            written (so a test can tell that the committed files are current).
"""

import argparse
import importlib.util
import math
import os
import sys

DTYPE = "float32"
DTYPE_BYTES = {"float32": 4}

# Published parameter counts.
PUBLISHED = {
    # torchvision.models.resnet50: "num_params": 25557032 (model docs).
    "resnet50": 25_557_032,
    # bert-base-uncased as transformers.BertModel (with pooler).
    "bert-base": 109_482_240,
}


# --- ResNet-50, as torchvision/models/resnet.py builds it -------------------

def resnet50_params():
    """(name, shape) in registration order, as torchvision's resnet50()."""
    p = []

    def conv(name, out_ch, in_ch, k):
        p.append((name + ".weight", (out_ch, in_ch, k, k)))     # bias=False

    def bn(name, ch):
        p.append((name + ".weight", (ch,)))
        p.append((name + ".bias", (ch,)))

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    inplanes = 64
    expansion = 4
    for layer, (planes, blocks) in enumerate(
            [(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for b in range(blocks):
            pre = "layer%d.%d." % (layer, b)
            # Bottleneck.__init__ order: conv1 bn1 conv2 bn2 conv3 bn3 relu
            # downsample; the stride sits on conv2 (v1.5), which does not
            # change any shape.
            conv(pre + "conv1", planes, inplanes, 1)
            bn(pre + "bn1", planes)
            conv(pre + "conv2", planes, planes, 3)
            bn(pre + "bn2", planes)
            conv(pre + "conv3", planes * expansion, planes, 1)
            bn(pre + "bn3", planes * expansion)
            if b == 0:      # stride != 1 or inplanes != planes * expansion
                conv(pre + "downsample.0", planes * expansion, inplanes, 1)
                bn(pre + "downsample.1", planes * expansion)
            inplanes = planes * expansion
    p.append(("fc.weight", (1000, 2048)))
    p.append(("fc.bias", (1000,)))
    return p


# --- BERT-base, as transformers' BertModel ---------------------------------

BERT = dict(vocab=30522, hidden=768, layers=12, intermediate=3072,
            max_positions=512, type_vocab=2)


def bert_base_params():
    """(name, shape) in registration order, as BertModel(bert-base-uncased)."""
    h, inter = BERT["hidden"], BERT["intermediate"]
    p = []

    def linear(name, out_f, in_f):
        p.append((name + ".weight", (out_f, in_f)))
        p.append((name + ".bias", (out_f,)))

    def layer_norm(name):
        p.append((name + ".weight", (h,)))
        p.append((name + ".bias", (h,)))

    p.append(("embeddings.word_embeddings.weight", (BERT["vocab"], h)))
    p.append(("embeddings.position_embeddings.weight", (BERT["max_positions"], h)))
    p.append(("embeddings.token_type_embeddings.weight", (BERT["type_vocab"], h)))
    layer_norm("embeddings.LayerNorm")
    for i in range(BERT["layers"]):
        pre = "encoder.layer.%d." % i
        linear(pre + "attention.self.query", h, h)
        linear(pre + "attention.self.key", h, h)
        linear(pre + "attention.self.value", h, h)
        linear(pre + "attention.output.dense", h, h)
        layer_norm(pre + "attention.output.LayerNorm")
        linear(pre + "intermediate.dense", inter, h)
        linear(pre + "output.dense", h, inter)
        layer_norm(pre + "output.LayerNorm")
    linear("pooler.dense", h, h)
    return p


# --- A ~10M-parameter MLP ---------------------------------------------------

MLP_WIDTHS = (784, 2048, 2048, 2048, 10)


def mlp_10m_params():
    """nn.Sequential(Linear(784,2048), ReLU, Linear(2048,2048), ReLU,
    Linear(2048,2048), ReLU, Linear(2048,10)): 10,020,874 parameters."""
    p = []
    for i, (a, b) in enumerate(zip(MLP_WIDTHS, MLP_WIDTHS[1:])):
        p.append(("%d.weight" % (2 * i), (b, a)))
        p.append(("%d.bias" % (2 * i), (b,)))
    return p


# The MLP is defined here; its count, worked by hand:
# 784*2048+2048 + 2*(2048*2048+2048) + 2048*10+10 = 10,020,874.
MLP_10M_PARAMETERS = 10_020_874


def uniform_64k_params():
    n = 64 * 1024 // DTYPE_BYTES[DTYPE]
    return [("tensor.%03d" % i, (n,)) for i in range(200)]


MIXES = {
    "resnet50": dict(
        params=resnet50_params, published=PUBLISHED["resnet50"],
        model="ResNet-50 (torchvision.models.resnet50, ResNet v1.5, 1000 classes)",
        source="shapes of torchvision's resnet50() named_parameters(), "
               "computed by bench/mixes/make_mixes.py"),
    "bert-base": dict(
        params=bert_base_params, published=PUBLISHED["bert-base"],
        model="BERT-base-uncased (transformers.BertModel with pooler; "
              "vocab 30522, hidden 768, 12 layers, 12 heads, intermediate 3072)",
        source="shapes of transformers' BertModel named_parameters(), "
               "computed by bench/mixes/make_mixes.py"),
    "mlp-10m": dict(
        params=mlp_10m_params, published=MLP_10M_PARAMETERS,
        model="MLP 784-2048-2048-2048-10 (ReLU; nn.Sequential of 4 nn.Linear)",
        source="shapes of the nn.Sequential's named_parameters(), "
               "computed by bench/mixes/make_mixes.py"),
    "uniform-64k": dict(
        params=uniform_64k_params, published=200 * 16384,
        model="synthetic: 200 float32 tensors of 64 KiB "
              "(the coordinator benchmark's batch, ci/bench fusion)",
        source="bench/mixes/make_mixes.py",
        order="submission order (tensor.000 first)"),
}

EXPECTED_TENSORS = {"resnet50": 161, "bert-base": 199, "mlp-10m": 8,
                    "uniform-64k": 200}


def numel(shape):
    return math.prod(shape)


def render(mix):
    spec = MIXES[mix]
    params = spec["params"]()
    total = sum(numel(s) for _, s in params)
    if total != spec["published"]:
        raise SystemExit("make_mixes.py: %s has %d parameters, the published "
                         "count is %d" % (mix, total, spec["published"]))
    if len(params) != EXPECTED_TENSORS[mix]:
        raise SystemExit("make_mixes.py: %s has %d parameter tensors, expected "
                         "%d" % (mix, len(params), EXPECTED_TENSORS[mix]))
    esize = DTYPE_BYTES[DTYPE]
    lines = [
        "# plait gradient mix: %s" % mix,
        "# model: %s" % spec["model"],
        "# source: %s" % spec["source"],
        "# parameters: %d" % total,
        "# tensors: %d" % len(params),
        "# bytes: %d (%s)" % (total * esize, DTYPE),
        "# order: %s" % spec.get(
            "order", "backward (reverse of parameter registration order)"),
        "# fields: name dtype shape bytes",
    ]
    # Gradients become ready last layer first: the file lists them in the
    # order a backward pass submits them. The synthetic mix is in order.
    for name, shape in (params if "order" in spec else reversed(params)):
        lines.append("%s %s %s %d" % (name, DTYPE, "x".join(map(str, shape)),
                                      numel(shape) * esize))
    return "\n".join(lines) + "\n"


# --- Cross-check with torch.nn, written like torchvision and transformers ---

def torch_resnet50(nn):
    """torchvision's ResNet and Bottleneck, cut down to what registers
    parameters (no forward)."""
    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

    class ResNet(nn.Module):
        def __init__(self, layers, num_classes=1000):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(64, layers[0])
            self.layer2 = self._make_layer(128, layers[1], 2)
            self.layer3 = self._make_layer(256, layers[2], 2)
            self.layer4 = self._make_layer(512, layers[3], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * 4, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * 4:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * 4, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * 4))
            layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * 4
            layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

    return ResNet([3, 4, 6, 3])


def torch_bert_base(nn):
    """transformers' BertModel modules for bert-base-uncased (no forward)."""
    h, inter = BERT["hidden"], BERT["intermediate"]

    class BertEmbeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(BERT["vocab"], h, padding_idx=0)
            self.position_embeddings = nn.Embedding(BERT["max_positions"], h)
            self.token_type_embeddings = nn.Embedding(BERT["type_vocab"], h)
            self.LayerNorm = nn.LayerNorm(h, eps=1e-12)
            self.dropout = nn.Dropout(0.1)

    class BertSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(h, h)
            self.key = nn.Linear(h, h)
            self.value = nn.Linear(h, h)
            self.dropout = nn.Dropout(0.1)

    class BertDenseNorm(nn.Module):     # BertSelfOutput and BertOutput
        def __init__(self, in_f):
            super().__init__()
            self.dense = nn.Linear(in_f, h)
            self.LayerNorm = nn.LayerNorm(h, eps=1e-12)
            self.dropout = nn.Dropout(0.1)

    class BertAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.self = BertSelfAttention()
            self.output = BertDenseNorm(h)

    class BertIntermediate(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(h, inter)

    class BertLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = BertAttention()
            self.intermediate = BertIntermediate()
            self.output = BertDenseNorm(inter)

    class BertEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.ModuleList(BertLayer() for _ in range(BERT["layers"]))

    class BertPooler(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(h, h)
            self.activation = nn.Tanh()

    class BertModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = BertEmbeddings()
            self.encoder = BertEncoder()
            self.pooler = BertPooler()

    return BertModel()


def torch_mlp_10m(nn):
    mlp = []
    for a, b in zip(MLP_WIDTHS, MLP_WIDTHS[1:]):
        mlp += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*mlp[:-1])


def torch_named_shapes():
    """Build the three models in plain torch.nn; {mix: [(name, shape)]}."""
    from torch import nn
    models = {"resnet50": torch_resnet50(nn), "bert-base": torch_bert_base(nn),
              "mlp-10m": torch_mlp_10m(nn)}
    return {mix: [(n, tuple(t.shape)) for n, t in m.named_parameters()]
            for mix, m in models.items()}


def cross_check_with_torch():
    if importlib.util.find_spec("torch") is None:
        print("make_mixes.py: torch is not importable here; shapes checked "
              "against the published totals only", file=sys.stderr)
        return
    built = torch_named_shapes()
    for mix, params in built.items():
        computed = MIXES[mix]["params"]()
        if params != computed:
            diff = next((i for i, (a, b) in enumerate(zip(params, computed))
                         if a != b), min(len(params), len(computed)))
            raise SystemExit("make_mixes.py: %s: torch.nn build and computed "
                             "shapes differ at tensor %d: %r vs %r" % (
                                 mix, diff, params[diff:diff + 1],
                                 computed[diff:diff + 1]))
        print("make_mixes.py: %s: torch.nn build agrees (%d tensors)" % (
            mix, len(params)), file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--check", action="store_true",
                    help="compare with the files in --out-dir, write nothing")
    ap.add_argument("--no-torch", action="store_true",
                    help="skip the cross-check against torch.nn modules")
    args = ap.parse_args(argv)
    if not args.no_torch:
        cross_check_with_torch()
    stale = []
    for mix in MIXES:
        text = render(mix)
        path = os.path.join(args.out_dir, mix + ".txt")
        if args.check:
            try:
                with open(path) as f:
                    current = f.read()
            except OSError:
                current = None
            if current != text:
                stale.append(path)
            continue
        with open(path, "w") as f:
            f.write(text)
        params = MIXES[mix]["params"]()
        total = sum(numel(s) for _, s in params)
        print("%s: %d tensors, %d parameters, %d bytes" % (
            path, len(params), total, total * DTYPE_BYTES[DTYPE]))
    if stale:
        print("make_mixes.py: out of date (rerun bench/mixes/make_mixes.py): "
              + " ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
