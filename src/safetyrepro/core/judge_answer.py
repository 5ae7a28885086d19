"""How a judge model answers."""

from safetyrepro.core.decoding import Decoding

ANSWER = Decoding(temperature=0.0, top_p=1.0, max_new_tokens=8)  # a letter or a word, greedily
