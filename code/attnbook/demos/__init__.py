"""The examples and experiments the lessons state as facts: toy data, seeded layers, measured
curves. Figure modules (:mod:`attnbook.figures`) draw them; notebooks glue their numbers."""
