"""attnlab: the tested code behind the course *From KV Cache to KDA*."""
