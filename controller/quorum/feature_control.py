"""FeatureControlManager: the finalized feature levels (KIP-584), metadata.version first among them (KIP-778).

The first active controller of a cluster finds no metadata.version in the log and writes it (the bootstrap);
brokers refuse to register when they cannot read the log at that version. A level goes up only (a downgrade of
metadata.version can lose metadata; Kafka 3.7 refuses the unsafe one and so do we, without the safe one).
"""

from __future__ import annotations

from typing import Any

from zkbroker.admin_checks import ApiError
from zkbroker.metadata.records import (
    FEATURE_LEVEL,
    METADATA_VERSION,
    METADATA_VERSION_3_7_IV4,
    MIN_METADATA_VERSION,
    MetadataRecord,
    record,
)
from zkbroker.protocol.errors import ErrorCode

from .events import ControllerResult
from .timeline import SnapshotRegistry, TimelineDict


class FeatureControlManager:
    def __init__(self, registry: SnapshotRegistry, latest_metadata_version: int = METADATA_VERSION_3_7_IV4) -> None:
        self.latest_metadata_version = latest_metadata_version
        self.finalized: TimelineDict[str, int] = TimelineDict(registry)

    @property
    def metadata_version(self) -> int | None:
        return self.finalized.get(METADATA_VERSION)

    def bootstrap_records(self) -> list[MetadataRecord]:
        """What a new cluster's first active controller writes before anything else."""
        if self.metadata_version is not None:
            return []
        return [record(FEATURE_LEVEL, name=METADATA_VERSION, feature_level=self.latest_metadata_version)]

    def update_feature(self, name: str, level: int) -> ControllerResult:
        """UpdateFeatures for one feature: ``{"error_code", "error_message"}``."""
        try:
            if name != METADATA_VERSION:
                raise ApiError(ErrorCode.INVALID_UPDATE_VERSION, f"Unknown feature {name}.")
            if not MIN_METADATA_VERSION <= level <= self.latest_metadata_version:
                raise ApiError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"Invalid metadata.version {level}: this controller supports "
                               f"{MIN_METADATA_VERSION} to {self.latest_metadata_version}.")
            current = self.metadata_version or 0
            if level < current:
                raise ApiError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"Invalid metadata.version {level}: a downgrade from {current} is refused.")
        except ApiError as e:
            return ControllerResult([], {"error_code": e.code, "error_message": e.message})
        records = [] if level == self.metadata_version else [
            record(FEATURE_LEVEL, name=name, feature_level=level)]
        return ControllerResult(records, {"error_code": ErrorCode.NONE, "error_message": None})

    def check_broker_supports(self, features: Any) -> None:
        """A registering broker must read the log at the finalized metadata.version (UNSUPPORTED_VERSION)."""
        level = self.metadata_version
        if level is None:
            return
        supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in features}
        low, high = supported.get(METADATA_VERSION, (MIN_METADATA_VERSION, MIN_METADATA_VERSION))
        if not low <= level <= high:
            raise ApiError(ErrorCode.UNSUPPORTED_VERSION,
                           f"Unable to register because the broker does not support version {level} of "
                           f"{METADATA_VERSION}. It wants a version between {low} and {high}, inclusive.")

    def replay(self, rec: Any) -> None:
        if rec.feature_level == 0:  # level 0 removes a feature
            self.finalized.pop(rec.name)
        else:
            self.finalized[rec.name] = rec.feature_level

    def snapshot_records(self) -> list[MetadataRecord]:
        # metadata.version first: a reader must know the format before anything else
        names = sorted(self.finalized, key=lambda name: (name != METADATA_VERSION, name))
        return [record(FEATURE_LEVEL, name=name, feature_level=self.finalized[name]) for name in names]
