"""The position curve and its arms, in one room: the curve itself and its swap (`position`),
the arms with their arm table (`arms`), the change built from an arm at one size (`change`),
the manipulation checks (`checks`, numbers only), the columns an arm's row carries
(`columns`), and the numbers the study's rule reads (`numbers`). The runner reaches them
through the intervention table (`adjpos.interventions.specs`); the study judges them
(`adjpos.study.rules`).
"""
