"""The examples and experiments the lessons state as facts: toy data, seeded layers, measured
curves. Figure modules (:mod:`attnlab.figures`) draw them; notebooks glue their numbers."""
