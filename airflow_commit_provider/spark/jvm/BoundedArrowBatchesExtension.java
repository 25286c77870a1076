package airflowcommit.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

import scala.Function1;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=airflowcommit.spark.BoundedArrowBatchesExtension} (with the jar in
 * {@code spark.jars}): {@link BoundedArrowBatches} in every session of an application, for a
 * server whose clients cannot install it themselves, as a Spark Connect server's cannot.
 *
 * <p>The rule must run after Spark has chosen each write's Write ({@code V2Writes}, in the
 * optimizer's early push-down batch), which no extension point offers: {@code injectOptimizerRule}
 * runs before it. So the injected rule does nothing itself, and its builder, called when a
 * session's optimizer is first built, installs the rule in that session's {@code
 * experimental.extraOptimizations}, whose batch runs last. The source name and bound are those
 * {@code register_data_source} gives a classic session ({@code spark/source_batches.py}).
 */
public final class BoundedArrowBatchesExtension implements Function1<SparkSessionExtensions, BoxedUnit> {
  /** The data source's name ({@code datasource.SHORT_NAME}). */
  static final String SOURCE_NAME = "committed";
  /** UnsafeRow bytes per batch ({@code source_batches.ROW_BYTES_PER_BATCH}). */
  static final int ROW_BYTES_PER_BATCH = 32 * 1024 * 1024;

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectOptimizerRule(
        session -> {
          BoundedArrowBatches.install(session, SOURCE_NAME, ROW_BYTES_PER_BATCH);
          return new Unchanged();
        });
    return BoxedUnit.UNIT;
  }

  /** The rule the extension point asks for: every plan as it is. */
  static final class Unchanged extends Rule<LogicalPlan> {
    @Override
    public LogicalPlan apply(LogicalPlan plan) {
      return plan;
    }
  }
}
