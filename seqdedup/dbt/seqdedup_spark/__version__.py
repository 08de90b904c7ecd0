# dbt reads an adapter's version from dbt.adapters.<type>.__version__; the adapter is versioned with seqdedup.
version = "0.1.0"
