"""GPU-equivalents of what a job was given, the same for every scheduler (DESIGN.md
"GPU-equivalents"): a whole GPU is 1; a MIG instance is its profile's fraction of the parent
GPU (the catalog's `mig_profiles`, else NVIDIA's A100/H100 rule `Ng` = N/7; a profile that is
neither is an error, which rejects the record); a replica of a
GPU shared by time-slicing, MPS or Slurm shards is 1/replicas of it (the node pool's `sharing`
in settings.yaml).
"""

from __future__ import annotations

import re
from fractions import Fraction

from pipelines.catalog import ClusterSettings

# A MIG profile as Slurm types (`1g.10gb`, `a100_3g.40gb`, `nvidia_a100_1g.5gb`) and the
# Kubernetes device plugin (`nvidia.com/mig-1g.10gb`, `mig-1g.10gb+me`) spell it: the parent
# GPU's type may come first, media extensions (`+me`) last.
MIG_PROFILE = re.compile(r"(?:(?P<parent>.*?)[_-])?(?P<profile>(?P<slices>\d+)g\.\d+gb)(?:[.+]me)?")
MIG_SHAPE = re.compile(r"(?P<slices>\d+)g\.(?P<memory_gb>\d+)gb")
MIG_SLICES = 7  # compute slices of an A100/H100: a `1g` instance is 1/7 of the GPU
# the memory of the largest GPU that MIG partitions (B300: 288 GB): a profile of more, or of no
# compute slice or more than 7, is no NVIDIA profile (the catalog's mig_profiles may name it)
MIG_MEMORY_GB = 288


def mig_profile(name: str) -> tuple[str, str | None] | None:
    """(profile, parent GPU type or None) of a MIG type name, None when it names no profile.
    `a100_3g.40gb` -> ('3g.40gb', 'a100'); `1g.10gb` -> ('1g.10gb', None)."""
    found = MIG_PROFILE.fullmatch(name.strip().lower())
    if found is None:
        return None
    return found["profile"], found["parent"] or None


def mig_equivalent(profile: str, settings: ClusterSettings) -> Fraction:
    """GPU-equivalents of one instance of `profile`: the catalog's entry for the profile
    (`1g.10gb`), else for its compute slices (`1g`), else N/7 for an NVIDIA shape (1 to 7
    slices, 1 to 288 GB). ValueError for any other profile: `9g.99gb` as a whole GPU, or
    `0g.5gb` as nothing, would be a charge no hardware gave."""
    profile = profile.strip().lower()
    table = settings.mig_profiles
    if profile in table:
        return table[profile]
    shape = MIG_SHAPE.fullmatch(profile)
    slices = int(shape["slices"]) if shape else 0
    if shape and f"{slices}g" in table:
        return table[f"{slices}g"]
    if (
        not shape
        or not 1 <= slices <= MIG_SLICES
        or not 1 <= int(shape["memory_gb"]) <= MIG_MEMORY_GB
    ):
        raise ValueError(
            f"unknown MIG profile '{profile}': NVIDIA's are 1g to {MIG_SLICES}g with 1 to "
            f"{MIG_MEMORY_GB} GB (declare any other in rates.yaml mig_profiles)"
        )
    return Fraction(slices, MIG_SLICES)


def gpu_text(gpus: Fraction) -> str:
    """Whole GPUs as an integer, fractions as the shortest float text that round-trips (the
    loader turns it back into 1/420ths of a GPU exactly)."""
    return str(gpus.numerator) if gpus.denominator == 1 else repr(float(gpus))
