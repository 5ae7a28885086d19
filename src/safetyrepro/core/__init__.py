"""The ground floor: the types and names the rest of the package shares. It imports nothing of the package beyond itself."""
