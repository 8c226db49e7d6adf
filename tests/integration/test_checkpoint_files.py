"""The job jar's checkpoint file manager (``fraud.spark.LocalCheckpointFiles``), the one Spark uses for the
project's local checkpoints: a file appears whole or not at all, an existing one is kept unless the
writer may overwrite it (Hadoop's ``FileAlreadyExistsException``, which Spark's metadata logs rely on),
and a cancelled write leaves nothing. The queries that resume from such checkpoints are the crash tests'."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(spark, tmp_path):
    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    path = jvm.org.apache.hadoop.fs.Path(str(tmp_path))
    return jvm.org.apache.spark.sql.execution.streaming.CheckpointFileManager.create(path, conf)


def _write(spark, manager, target, data: bytes, overwrite: bool, close: bool = True):
    stream = manager.createAtomic(spark._jvm.org.apache.hadoop.fs.Path(str(target)), overwrite)
    stream.write(bytearray(data))
    if close:
        stream.close()
    return stream


def test_the_sessions_checkpoints_use_the_jobs_manager(manager):
    assert manager.getClass().getName() == "fraud.spark.LocalCheckpointFiles"
    assert manager.isLocal()


def test_a_file_appears_whole_when_closed(spark, manager, tmp_path):
    target = tmp_path / "offsets" / "0"
    (tmp_path / "offsets").mkdir()
    stream = _write(spark, manager, target, b"v1\n{}\n", overwrite=False, close=False)
    assert not target.exists(), "visible before its writer closed it"
    stream.close()
    assert target.read_bytes() == b"v1\n{}\n"
    assert [p.name for p in (tmp_path / "offsets").iterdir()] == ["0"], "a temporary file was left"


def test_an_existing_file_is_kept_unless_overwriting(spark, manager, tmp_path):
    target = tmp_path / "commits-0"
    _write(spark, manager, target, b"first", overwrite=False)
    with pytest.raises(Py4JJavaError, match="org.apache.hadoop.fs.FileAlreadyExistsException"):
        _write(spark, manager, target, b"second", overwrite=False)
    assert target.read_bytes() == b"first"
    _write(spark, manager, target, b"third", overwrite=True)
    assert target.read_bytes() == b"third"


def test_a_cancelled_write_leaves_nothing(spark, manager, tmp_path):
    stream = _write(spark, manager, tmp_path / "1.delta", b"partial", overwrite=True, close=False)
    stream.cancel()
    assert list(tmp_path.iterdir()) == []
