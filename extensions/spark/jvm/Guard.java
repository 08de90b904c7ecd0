package seqdedup.guards;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.expressions.MutableAggregationBuffer;
import org.apache.spark.sql.expressions.UserDefinedAggregateFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * A function seqdedup rewrites (is_not_dup, dup_status, last_sequence_id) that reached Spark as written: it refuses
 * the statement while Spark resolves the call, with seqdedup's message.
 *
 * <p>Why an aggregate: Spark builds an aggregate function's expression as it resolves the call, and that asks for
 * {@link #inputSchema()}; an AnalysisException thrown there reaches the user as it is. So the refusal comes before
 * Spark checks the INSERT's column count (the natural statement selects the payload only, where the topic's table
 * also holds system columns) and before the statement runs. A Hive UDF fails just as early, but Spark replaces its
 * error with CANNOT_INSTANTIATE_HIVE_FUNCTION. Each function is a subclass with the message of its name
 * (extensions/spark_guards.py writes them from udfs/guards.py).
 */
@SuppressWarnings("deprecation")
public abstract class Guard extends UserDefinedAggregateFunction {
    private final String message;

    protected Guard(String message) {
        this.message = message;
    }

    /** The refusal, as Spark's raise_error gives it (USER_RAISED_EXCEPTION), thrown unchecked. */
    private RuntimeException refusal() {
        AnalysisException error = new AnalysisException(
            "USER_RAISED_EXCEPTION", new scala.collection.immutable.Map.Map1<>("errorMessage", message));
        return Guard.<RuntimeException>unchecked(error);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException unchecked(Throwable error) throws E {
        throw (E) error;
    }

    @Override public StructType inputSchema() { throw refusal(); }
    @Override public StructType bufferSchema() { throw refusal(); }
    @Override public DataType dataType() { throw refusal(); }
    @Override public boolean deterministic() { return true; }
    @Override public void initialize(MutableAggregationBuffer buffer) { throw refusal(); }
    @Override public void update(MutableAggregationBuffer buffer, Row input) { throw refusal(); }
    @Override public void merge(MutableAggregationBuffer buffer, Row input) { throw refusal(); }
    @Override public Object evaluate(Row buffer) { throw refusal(); }
}
