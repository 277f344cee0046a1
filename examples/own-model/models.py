"""A lab's own image models, as a lab would write them in PyTorch, and how to
export them for Tessera.

Two small models (made here, nothing downloaded; the weights are a fixed
seed's initialisation, optionally briefly fitted with --fit-steps):
  colorizer  gray in [-1, 1] -> RGB in [-1, 1] (pix2pix's convention); one 2x
             downsampling, so sides must be even (Tessera probes that)
  denoiser   RGB in [0, 1] -> RGB in [0, 1], DnCNN-style residual

export_torchscript(model, path, tessera)  torch.jit.script + torch.jit.save
    with the image convention in the module's "tessera.json" extra file
export_aoti(model, path, tessera)         torch.export with a dynamic batch,
    height and width, then AOTInductor's package (.pt2) for the CPU
"""
import json

import torch
from torch import nn


class Colorizer(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.encode = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
                                    nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.AvgPool2d(2), nn.Conv2d(width, width, 3, padding=1),
                                  nn.ReLU(), nn.Upsample(scale_factor=2.0, mode="nearest"))
        self.decode = nn.Conv2d(2 * width, 3, 3, padding=1)

    def forward(self, x):
        e = self.encode(x)
        return torch.tanh(self.decode(torch.cat([e, self.down(e)], dim=1)))


class Denoiser(nn.Module):
    def __init__(self, width: int = 16, depth: int = 5):
        super().__init__()
        layers = [nn.Conv2d(3, width, 3, padding=1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        layers += [nn.Conv2d(width, 3, 3, padding=1)]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return x - self.body(x)


def sequential_colorizer(width: int = 16) -> nn.Sequential:
    """A colorizer written as a plain nn.Sequential: its children are the layers
    Tessera's planner may cut into pipeline stages (tessera-worker train
    --model-file)."""
    return nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(width, 3, 3, padding=1), nn.Tanh())


COLORIZER_CONVENTION = {"input": "gray", "output": "rgb", "range": [-1, 1]}
DENOISER_CONVENTION = {"input": "rgb", "output": "rgb", "range": [0, 1]}


def make(name: str, seed: int = 0, fit_steps: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = Colorizer() if name == "colorizer" else Denoiser()
    if fit_steps > 0:
        fit(model, name, fit_steps, seed)
    return model.eval()


def fit(model: nn.Module, name: str, steps: int, seed: int) -> None:
    """A few Adam steps on random smooth images, so the weights are not bare noise."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(steps):
        rgb = torch.nn.functional.interpolate(torch.rand(8, 3, 8, 8, generator=gen), size=64,
                                              mode="bilinear", align_corners=False)
        if name == "colorizer":
            gray = (0.299 * rgb[:, 0:1] + 0.587 * rgb[:, 1:2] + 0.114 * rgb[:, 2:3]) * 2 - 1
            loss = (model(gray) - (rgb * 2 - 1)).abs().mean()
        else:
            noisy = (rgb + 0.1 * torch.randn(rgb.shape, generator=gen)).clamp(0, 1)
            loss = (model(noisy) - rgb).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def export_torchscript(model: nn.Module, path: str, tessera: dict | None) -> None:
    scripted = torch.jit.script(model.eval())
    extra = {"tessera.json": json.dumps(tessera)} if tessera else {}
    torch.jit.save(scripted, path, _extra_files=extra)


def export_aoti(model: nn.Module, path: str, tessera: dict | None, align: int = 2) -> None:
    # Batch, height and width dynamic, so Tessera can batch and tile any size;
    # sides as multiples of `align` (the model's downsampling).
    example = torch.rand(2, 3 if isinstance(model, Denoiser) else 1, 64, 64)
    batch = torch.export.Dim("batch", min=1, max=256)
    h = torch.export.Dim("h", min=1, max=4096)
    w = torch.export.Dim("w", min=1, max=4096)
    shapes = {"x": {0: batch, 2: align * h, 3: align * w}} if align > 1 else \
        {"x": {0: batch, 2: torch.export.Dim("hh", min=2, max=8192),
               3: torch.export.Dim("ww", min=2, max=8192)}}
    with torch.no_grad():
        program = torch.export.export(model.eval(), (example,), dynamic_shapes=shapes)
    configs = {"aot_inductor.metadata": {"tessera.json": json.dumps(tessera)}} if tessera else {}
    torch._inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=configs)
