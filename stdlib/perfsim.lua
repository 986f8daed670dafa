-- perfsim stdlib entry point (populated by the DSL work).
return {}
