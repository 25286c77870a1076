package airflowcommit.spark;

import java.io.IOException;
import java.util.Iterator;
import java.util.Properties;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteSummary;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.collection.immutable.Seq;

/**
 * The Arrow batches that carry a {@code df.write.format("committed")} write's rows to its Python
 * tasks, bounded by bytes without Spark's per-row measurement.
 *
 * <p>Spark 4 cuts those batches at {@code spark.sql.execution.arrow.maxRecordsPerBatch} rows or at
 * {@code maxBytesPerBatch} bytes, and to know the bytes it measures the batch after every row it
 * adds ({@code BatchedPythonArrowInput.writeSizedBatch} calls {@code ArrowWriter.sizeInBytes}):
 * tens of nanoseconds per column per row, most of what moving narrow rows to Python costs. A
 * Python data source cannot scope a setting to its own writes: its {@code writer()} runs in a
 * planner process with no session. So this optimizer rule, installed in one session by
 * {@code register_data_source} (or by {@code spark.sql.extensions}), wraps the write of the one
 * data source it names, and each task of that write:
 *
 * <ul>
 *   <li>turns the measurement off for the Python runner it starts ({@code maxBytesPerBatch =
 *       Int.MaxValue} in the task's local properties, which Spark's executors read as the task's
 *       SQL conf, and only while the task writes), unless the session or the calling thread set
 *       the key itself: their value is kept, measured as they asked;
 *   <li>hands the runner its rows through {@link BytesBoundedRows}, which ends a batch once its
 *       rows' {@code UnsafeRow} bytes reach the bound: Spark's loop stops a batch when the rows
 *       iterator says it has no next row, and starts the next batch when it says it has one. An
 *       {@code UnsafeRow}'s size is known without work, and it is never less than half the row's
 *       Arrow size (a decimal of up to 18 digits: 8 bytes against Arrow's 16), so a bound of half
 *       Spark's 64 MiB keeps batches of 1 MB rows within 64 MiB as Spark's measurement does.
 * </ul>
 *
 * <p>The row limit stays the session's ({@code maxRecordsPerBatch}, 10,000 by default), and
 * nothing else in the session changes: other queries' plans pass through the rule untouched.
 */
public final class BoundedArrowBatches extends Rule<LogicalPlan> {
  /** The SQL conf key whose value Int.MaxValue turns Spark's per-row measurement off. */
  public static final String MAX_BYTES_PER_BATCH = "spark.sql.execution.arrow.maxBytesPerBatch";
  /** Spark's Write of a Python data source; its toString is the source's short name. */
  static final String PYTHON_WRITE = "org.apache.spark.sql.execution.datasources.v2.python.PythonWrite";

  private final String sourceName;
  private final long rowBytesPerBatch;

  public BoundedArrowBatches(String sourceName, long rowBytesPerBatch) {
    this.sourceName = sourceName;
    this.rowBytesPerBatch = rowBytesPerBatch;
  }

  /**
   * Adds the rule to {@code session}'s optimizer (a classic session: {@code
   * spark.experimental.extraOptimizations}, whose batch runs after Spark has chosen each write's
   * Write). Idempotent: a rule of this class already there is replaced.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static synchronized void install(Object session, String sourceName, int rowBytesPerBatch) {
    org.apache.spark.sql.ExperimentalMethods experimental =
        ((org.apache.spark.sql.classic.SparkSession) session).experimental();
    Seq<Rule<LogicalPlan>> rules = experimental.extraOptimizations();
    Seq<Rule<LogicalPlan>> others =
        (Seq) rules.filterNot(rule -> rule.getClass().getName().equals(BoundedArrowBatches.class.getName()));
    experimental.extraOptimizations_$eq(
        (Seq) others.appended(new BoundedArrowBatches(sourceName, rowBytesPerBatch)));
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    // A write command is the root of its plan: nothing below it is looked at.
    Object[] arguments = new Object[plan.productArity()];
    int writeAt = -1;
    for (int index = 0; index < arguments.length; index++) {
      arguments[index] = plan.productElement(index);
      if (arguments[index] instanceof Option<?> option && option.isDefined() && isOurs(option.get())) {
        writeAt = index;
      }
    }
    if (writeAt < 0) {
      return plan;
    }
    Write write = (Write) ((Option<?>) arguments[writeAt]).get();
    Batching batching = new Batching(((LogicalPlan) plan.children().head()).schema(), rowBytesPerBatch);
    arguments[writeAt] = Option.apply(new BoundedWrite(write, batching));
    return plan.makeCopy(arguments);
  }

  private boolean isOurs(Object write) {
    return write.getClass().getName().equals(PYTHON_WRITE) && write.toString().equals(sourceName);
  }

  /** How a write's rows are batched: the rows' schema, and the UnsafeRow bytes that end a batch. */
  record Batching(StructType schema, long rowBytesPerBatch) implements java.io.Serializable {}

  /** What each wrapper below holds: Spark's object, whose calls it passes on, and the batching. */
  abstract static class Wrapper<T> implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final T wrapped;
    final Batching batching;

    Wrapper(T wrapped, Batching batching) {
      this.wrapped = wrapped;
      this.batching = batching;
    }
  }

  /** The data source's Write, its tasks' rows handed over in bounded batches. */
  static final class BoundedWrite extends Wrapper<Write> implements Write {
    BoundedWrite(Write write, Batching batching) {
      super(write, batching);
    }

    @Override
    public String description() {
      return wrapped.description();
    }

    @Override
    public String toString() {
      return wrapped.toString();
    }

    @Override
    public BatchWrite toBatch() {
      return new BoundedBatchWrite(wrapped.toBatch(), batching);
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return wrapped.supportedCustomMetrics();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
      return wrapped.reportDriverMetrics();
    }
  }

  /** Spark's BatchWrite of the data source, whose writer factory is wrapped. */
  static final class BoundedBatchWrite extends Wrapper<BatchWrite> implements BatchWrite {
    BoundedBatchWrite(BatchWrite batchWrite, Batching batching) {
      super(batchWrite, batching);
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return new BoundedWriterFactory(wrapped.createBatchWriterFactory(info), batching);
    }

    @Override
    public boolean useCommitCoordinator() {
      return wrapped.useCommitCoordinator();
    }

    @Override
    public void onDataWriterCommit(WriterCommitMessage message) {
      wrapped.onDataWriterCommit(message);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
      wrapped.commit(messages);
    }

    @Override
    public void commit(WriterCommitMessage[] messages, WriteSummary summary) {
      wrapped.commit(messages, summary);
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      wrapped.abort(messages);
    }
  }

  /** Sent to the executors: makes each task's writer. */
  static final class BoundedWriterFactory extends Wrapper<DataWriterFactory> implements DataWriterFactory {
    BoundedWriterFactory(DataWriterFactory factory, Batching batching) {
      super(factory, batching);
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new BoundedWriter(wrapped.createWriter(partitionId, taskId), batching);
    }
  }

  /** One task's writer: Spark's, run with the measurement off and the rows bounded by bytes. */
  static final class BoundedWriter extends Wrapper<DataWriter<InternalRow>> implements DataWriter<InternalRow> {
    BoundedWriter(DataWriter<InternalRow> writer, Batching batching) {
      super(writer, batching);
    }

    @Override
    public void writeAll(Iterator<InternalRow> records) throws IOException {
      TaskContext task = TaskContext.get();
      Properties conf = task == null ? null : task.getLocalProperties();
      if (conf == null || conf.getProperty(MAX_BYTES_PER_BATCH) != null) {
        wrapped.writeAll(records); // the session or the calling thread chose: Spark measures as asked
        return;
      }
      conf.setProperty(MAX_BYTES_PER_BATCH, Integer.toString(Integer.MAX_VALUE));
      try {
        wrapped.writeAll(new BytesBoundedRows(records, batching));
      } finally {
        conf.remove(MAX_BYTES_PER_BATCH);
      }
    }

    @Override
    public void write(InternalRow record) throws IOException {
      wrapped.write(record);
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
      return wrapped.commit();
    }

    @Override
    public void abort() throws IOException {
      wrapped.abort();
    }

    @Override
    public void close() throws IOException {
      wrapped.close();
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
      return wrapped.currentMetricsValues();
    }
  }

  /**
   * A task's rows, with one "no next row" after each run of rows whose UnsafeRow bytes reach the
   * bound: Spark's batch loop ({@code writeSizedBatch}: {@code while (rows.hasNext && ...)}) then
   * ends the batch, and asks again before the next one ({@code if (nextBatchStart.hasNext)}).
   * A row that is not an UnsafeRow is measured as one (Spark's own projection of the schema).
   */
  static final class BytesBoundedRows implements Iterator<InternalRow> {
    private final Iterator<InternalRow> rows;
    private final Batching batching;
    private UnsafeProjection projection;
    private long bytes;
    private boolean endOfBatch;

    BytesBoundedRows(Iterator<InternalRow> rows, Batching batching) {
      this.rows = rows;
      this.batching = batching;
    }

    @Override
    public boolean hasNext() {
      if (endOfBatch) {
        endOfBatch = false;
        return false;
      }
      return rows.hasNext();
    }

    @Override
    public InternalRow next() {
      InternalRow row = rows.next();
      bytes += sizeOf(row);
      if (bytes >= batching.rowBytesPerBatch()) {
        bytes = 0;
        endOfBatch = true;
      }
      return row;
    }

    private long sizeOf(InternalRow row) {
      if (row instanceof UnsafeRow unsafe) {
        return unsafe.getSizeInBytes();
      }
      if (projection == null) {
        projection = UnsafeProjection.create(batching.schema());
      }
      return projection.apply(row).getSizeInBytes();
    }
  }
}
