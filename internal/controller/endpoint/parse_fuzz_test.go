package endpoint

import (
	"encoding/json"
	"testing"
)

// The controller parses three inputs it does not control: TEI's /info
// answer, the populate init container's termination message (both written
// by whatever runs in the pod) and binding names found in the cluster.

// FuzzParseInfo checks that any /info body either fails or yields a served
// model with a model id, which TEI's encoding of it parses back to.
func FuzzParseInfo(f *testing.F) {
	for _, seed := range []string{
		`{"model_id":"BAAI/bge-small-en-v1.5","model_sha":"abc","model_dtype":"float16","max_input_length":512}`,
		`{"model_id":""}`, `{"model_id":null}`, `{"model_id":1}`, `{}`, `[]`, `null`, `{"max_input_length":1e99,"model_id":"a"}`,
		`{"model_id":"a","model_id":"b"}`, `{"model_id":"\u0000"}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		served, err := ParseInfo(body)
		if err != nil {
			return
		}
		if served == nil || served.ModelID == "" {
			t.Fatalf("%q parsed to %+v without a model id", body, served)
		}
		encoded, err := json.Marshal(teiInfo{ModelID: &served.ModelID, ModelSHA: served.ModelSHA, ModelDType: served.DType, MaxInputLength: served.MaxInputLength})
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseInfo(encoded)
		if err != nil || *again != *served {
			t.Fatalf("%q parsed to %+v, whose encoding %s parses to %+v (%v)", body, served, encoded, again, err)
		}
	})
}
