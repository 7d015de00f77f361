"""The incidents table and its queries, in the caller's transaction."""
