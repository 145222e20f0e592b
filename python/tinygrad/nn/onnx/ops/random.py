"""Random operators (RandomUniform/Normal and their -Like forms, Bernoulli, Multinomial) with seeds."""
from __future__ import annotations
