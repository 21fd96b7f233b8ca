"""The position curve (`position`), its arms and their table (`arms`), an arm set to one size
(`change`), the manipulation checks (`checks`), an arm row's columns (`columns`) and the
numbers the study's rule reads (`numbers`), reached through the intervention table (`specs`).
"""
