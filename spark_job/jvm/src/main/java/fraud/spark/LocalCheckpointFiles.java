package fraud.spark;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.FileContextBasedCheckpointFileManager;

/**
 * Spark's checkpoint file manager, with a checkpoint on the local file system written through java.nio.
 *
 * <p>Every checkpoint file (a batch's offsets and commit, every state store's delta per operator and
 * batch) is written to a temporary file and renamed. Without Hadoop's native library, Hadoop's local
 * file system starts a process for each step: {@code chmod} after creating the file and {@code readlink}
 * four times to rename it. Here the file is created and atomically renamed in the JVM. Other schemes
 * (HDFS, S3) go to Spark's own manager unchanged. Set as {@code spark.sql.streaming.checkpointFileManagerClass}
 * by {@code common/spark.py}.
 */
public class LocalCheckpointFiles extends FileContextBasedCheckpointFileManager {
    private final boolean local;

    public LocalCheckpointFiles(Path path, Configuration hadoopConf) {
        super(path, hadoopConf);
        String scheme = path.toUri().getScheme();
        if (scheme == null) {
            scheme = FileSystem.getDefaultUri(hadoopConf).getScheme();
        }
        local = "file".equals(scheme);
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        if (!local) {
            return super.createTempFile(path);
        }
        try {
            return new FSDataOutputStream(new BufferedOutputStream(new FileOutputStream(file(path)), 64 * 1024), null);
        } catch (IOException e) {
            throw unchecked(e);
        }
    }

    @Override
    public void renameTempFile(Path srcPath, Path dstPath, boolean overwriteIfPossible) {
        if (!local) {
            super.renameTempFile(srcPath, dstPath, overwriteIfPossible);
            return;
        }
        java.nio.file.Path src = file(srcPath).toPath();
        java.nio.file.Path dst = file(dstPath).toPath();
        try {
            if (overwriteIfPossible) {
                Files.move(src, dst, StandardCopyOption.ATOMIC_MOVE);
            } else {
                // A link fails if the name is taken, atomically: of two writers of one batch, one wins.
                Files.createLink(dst, src);
                Files.delete(src);
            }
        } catch (FileAlreadyExistsException e) {
            // Hadoop's exception, as Spark's own manager throws it: the metadata logs catch it to tell
            // "this batch was written already" from a failure.
            throw unchecked(new org.apache.hadoop.fs.FileAlreadyExistsException(dstPath + " already exists"));
        } catch (IOException e) {
            throw unchecked(e);
        }
    }

    /** Throws a checked exception through a method Scala declared without any (as Spark's own manager does). */
    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException unchecked(Throwable error) throws E {
        throw (E) error;
    }

    private static File file(Path path) {
        return new File(path.toUri().getPath());
    }
}
