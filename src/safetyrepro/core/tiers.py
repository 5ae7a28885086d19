"""The tiers a config belongs to: core when every axis value is, else stress."""

CORE, STRESS = "core", "stress"
