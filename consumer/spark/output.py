"""The output directory of `zkbroker spark-ingest`: staging directories, batch reservations, manifests (the
atomic commit point of a batch) and the published `batch=<n>` directories. See `ingest.py` for the order of the
commit and what recovery does with each piece."""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Manifest", "OutputLayout", "data_bytes"]


@dataclass(frozen=True)
class Manifest:
    """`_zkkafka/<batch>.json`: what batch <batch> holds. ranges: [topic, partition, start, end] (end exclusive)."""

    batch: int
    group: str
    consumer: str
    zookeeper: str
    format: str
    ranges: list[list]
    records: int
    lost: list[list] = field(default_factory=list)  # [topic, partition, start, end] skipped (failOnDataLoss=false)
    created: str = ""

    def encode(self) -> bytes:
        return json.dumps({"version": 1, **asdict(self)}, indent=1).encode()

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        obj = json.loads(data)
        obj.pop("version", None)
        return cls(**obj)


class OutputLayout:
    """Where a batch's pieces live under the output directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.meta = self.root / "_zkkafka"
        self.staging_root = self.meta / "staging"

    def manifest(self, batch: int) -> Path:
        return self.meta / f"{batch}.json"

    def staging(self, batch: int) -> Path:
        return self.staging_root / str(batch)

    def owner(self, batch: int) -> Path:
        return self.staging_root / f"{batch}.owner"

    def data(self, batch: int) -> Path:
        return self.root / f"batch={batch}"

    def manifests(self) -> list[Manifest]:
        if not self.meta.is_dir():
            return []
        out = []
        for path in self.meta.glob("*.json"):
            if path.stem.isdigit():
                out.append(Manifest.decode(path.read_bytes()))
        return sorted(out, key=lambda m: m.batch)

    def reservations(self) -> dict[int, dict]:
        """Reserved batches not yet cleaned up: {batch: {"group", "consumer"}}."""
        if not self.staging_root.is_dir():
            return {}
        out = {}
        for path in self.staging_root.glob("*.owner"):
            if path.stem.isdigit():
                try:
                    out[int(path.stem)] = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    continue
        return out

    def last_batch(self) -> int:
        numbers = [m.batch for m in self.manifests()] + list(self.reservations())
        numbers += [int(p.name[6:]) for p in self.root.glob("batch=*") if p.name[6:].isdigit()]
        return max(numbers, default=0)

    def reserve(self, group: str, consumer: str) -> int:
        """The next batch number, claimed by creating its owner file atomically (a hard link fails if taken)."""
        self.staging_root.mkdir(parents=True, exist_ok=True)
        tmp = self.staging_root / f".owner-{os.getpid()}-{threading.get_ident()}"
        tmp.write_bytes(json.dumps({"group": group, "consumer": consumer}).encode())
        try:
            batch = self.last_batch() + 1
            while True:
                try:
                    os.link(tmp, self.owner(batch))
                except FileExistsError:
                    batch += 1
                    continue
                if self.manifest(batch).exists() or self.data(batch).exists():
                    batch += 1  # a batch finished and cleaned up between our look and our link
                    continue
                return batch
        finally:
            tmp.unlink()

    def release(self, batch: int) -> None:
        shutil.rmtree(self.staging(batch), ignore_errors=True)
        self.owner(batch).unlink(missing_ok=True)

    def commit_manifest(self, manifest: Manifest) -> None:
        """Write the manifest to a temporary file, fsync it, rename it into place, fsync the directory."""
        tmp = self.meta / f".{manifest.batch}.json.tmp"
        with open(tmp, "wb") as f:
            f.write(manifest.encode())
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, self.manifest(manifest.batch))
        _fsync_dir(self.meta)

    def publish(self, batch: int) -> bool:
        """Move a committed batch's data from staging to `batch=<n>`; False if it is not (or no longer) there."""
        staging, final = self.staging(batch), self.data(batch)
        if final.exists():
            self.release(batch)
            return False
        try:
            os.rename(staging, final)
        except FileNotFoundError:
            return final.exists()
        _fsync_dir(self.root)
        self.owner(batch).unlink(missing_ok=True)
        return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def data_bytes(path: Path) -> int:
    """Bytes of the data files of a published batch (Hadoop's .crc files and _SUCCESS markers left out)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))

