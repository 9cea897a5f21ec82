"""spark-ingest's output directory without Spark: batch numbers reserved atomically, the manifest committed by
rename, staging published into place."""

from __future__ import annotations

import threading

from consumer.spark.output import Manifest, OutputLayout


def manifest(batch: int) -> Manifest:
    return Manifest(batch, "g", "g_c1", "zk:2181/k", "parquet", [["t", 0, 0, 10], ["t", 1, 5, 9]], 14)


def test_batch_numbers_are_reserved_once_each_even_by_concurrent_jobs(tmp_path):
    layout = OutputLayout(tmp_path)
    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(layout.reserve("g", "c"))) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 21))
    assert set(layout.reservations()) == set(range(1, 21))
    assert layout.reservations()[3] == {"group": "g", "consumer": "c"}


def test_a_reservation_skips_numbers_committed_or_published(tmp_path):
    layout = OutputLayout(tmp_path)
    layout.meta.mkdir(parents=True)
    layout.commit_manifest(manifest(4))
    (tmp_path / "batch=7").mkdir()
    assert layout.reserve("g", "c") == 8


def test_the_manifest_is_committed_by_rename_and_read_back(tmp_path):
    layout = OutputLayout(tmp_path)
    layout.meta.mkdir(parents=True)
    layout.commit_manifest(manifest(2))
    assert [p.name for p in layout.meta.iterdir()] == ["2.json"]  # no temporary file left
    assert layout.manifests() == [manifest(2)]


def test_publishing_moves_the_staging_directory_into_place_once(tmp_path):
    layout = OutputLayout(tmp_path)
    batch = layout.reserve("g", "c")
    (layout.staging(batch) / "part-0.parquet").parent.mkdir(parents=True)
    (layout.staging(batch) / "part-0.parquet").write_bytes(b"data")
    assert layout.publish(batch)
    assert (tmp_path / f"batch={batch}" / "part-0.parquet").read_bytes() == b"data"
    assert not layout.staging(batch).exists() and layout.reservations() == {}
    assert not layout.publish(batch)  # already published: nothing to do


def test_releasing_an_uncommitted_batch_removes_its_data_and_reservation(tmp_path):
    layout = OutputLayout(tmp_path)
    batch = layout.reserve("g", "c")
    layout.staging(batch).mkdir(parents=True)
    layout.release(batch)
    assert not layout.staging(batch).exists() and layout.reservations() == {}
    assert layout.reserve("g", "c") == batch  # the number is free again
