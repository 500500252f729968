"""tabd cache: completion cache keyed by document state, type-through, in-flight reuse, speculation planner."""
