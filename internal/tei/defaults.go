package tei

// Defaults are the `default_value`s of TEI's arguments that a stand-in
// acts on (router/src/main.rs, v1.9.3). An argument without one is an
// Option: absent unless given (revision among them: the router downloads
// "main" but reports the absent revision as a null model_sha).
var Defaults = map[string]string{
	"max_concurrent_requests": "512",
	"max_batch_tokens":        "16384",
	"max_client_batch_size":   "32",
	"auto_truncate":           "false",
	"hostname":                "0.0.0.0",
	"port":                    "3000",
	"uds_path":                "/tmp/text-embeddings-inference-server",
	"payload_limit":           "2000000",
	"json_output":             "false",
	"disable_spans":           "false",
	"otlp_service_name":       "text-embeddings-inference.server",
	"prometheus_port":         "9000",
}

// Value returns the value of the argument id: given, else its default, else
// "".
func (p Parsed) Value(id string) string {
	if given, ok := p[id]; ok {
		return given.Value
	}
	return Defaults[id]
}

// Lookup returns the value of the argument id and whether it was given.
func (p Parsed) Lookup(id string) (string, bool) {
	given, ok := p[id]
	return given.Value, ok
}

// HubToken is the token the router gives the hub client: --hf-token, else
// the deprecated --hf-api-token (router/src/main.rs:
// `args.hf_token.or(args.hf_api_token)`).
func (p Parsed) HubToken() string {
	if token, ok := p.Lookup("hf_token"); ok {
		return token
	}
	return p.Value("hf_api_token")
}
