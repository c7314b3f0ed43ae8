package decision

// ShardLabels returns the labels among keys that the server carries: the
// labels its binding copies, so the binding falls under the watch selector
// of the controller that reconciles the server (a binding follows the
// server it serves).
func ShardLabels(server map[string]string, keys []string) map[string]string {
	var shard map[string]string
	for _, key := range keys {
		if value, ok := server[key]; ok {
			if shard == nil {
				shard = map[string]string{}
			}
			shard[key] = value
		}
	}
	return shard
}

// SameShard reports whether a binding and a server agree on every label
// among keys, present or absent: only then does the server's controller
// see and write the binding. Servers of different shards never share a
// binding; each shard gets its own.
func SameShard(binding, server map[string]string, keys []string) bool {
	for _, key := range keys {
		b, inBinding := binding[key]
		s, inServer := server[key]
		if inBinding != inServer || b != s {
			return false
		}
	}
	return true
}
