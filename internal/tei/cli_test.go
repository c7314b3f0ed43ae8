package tei_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/tei"
)

func TestParseAcceptsWhatTEIAccepts(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		env  map[string]string
		want tei.Parsed
	}{
		{
			name: "flags with = and with a separate value",
			argv: []string{"--model-id=a/b", "--revision", "main", "--json-output"},
			want: tei.Parsed{
				"model_id":    {Value: "a/b", Source: tei.CommandLine},
				"revision":    {Value: "main", Source: tei.CommandLine},
				"json_output": {Value: "true", Source: tei.CommandLine},
			},
		},
		{
			name: "model id from the environment, flag over variable",
			argv: []string{"--port=8080", "--hostname=::"},
			env:  map[string]string{"MODEL_ID": "a/b", "PORT": "80", "HOSTNAME": "pod-0"},
			want: tei.Parsed{
				"model_id": {Value: "a/b", Source: tei.Environment},
				"port":     {Value: "8080", Source: tei.CommandLine},
				"hostname": {Value: "::", Source: tei.CommandLine},
			},
		},
		{
			name: "the short port flag with its value attached",
			argv: []string{"--model-id=a/b", "-p9000"},
			want: tei.Parsed{"model_id": {Value: "a/b", Source: tei.CommandLine}, "port": {Value: "9000", Source: tei.CommandLine}},
		},
		{
			name: "one token, from the environment",
			argv: []string{"--model-id=a/b"},
			env:  map[string]string{"HF_TOKEN": "secret", "AUTO_TRUNCATE": "false"},
			want: tei.Parsed{
				"model_id":      {Value: "a/b", Source: tei.CommandLine},
				"hf_token":      {Value: "secret", Source: tei.Environment},
				"auto_truncate": {Value: "false", Source: tei.Environment},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := tei.Parse(tc.argv, tc.env)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestParseRefusesWhatTEIRefuses(t *testing.T) {
	cases := []struct {
		name    string
		argv    []string
		env     map[string]string
		message string
	}{
		{"HF_TOKEN together with HF_API_TOKEN, both from the environment", []string{"--model-id=a/b"},
			map[string]string{"HF_TOKEN": "x", "HF_API_TOKEN": "x"}, "'--hf-token <HF_TOKEN>' cannot be used with '--hf-api-token <HF_API_TOKEN>'"},
		{"a token flag beside the deprecated variable", []string{"--model-id=a/b", "--hf-token=x"},
			map[string]string{"HF_API_TOKEN": "x"}, "cannot be used with '--hf-api-token"},
		{"both default prompts", []string{"--model-id=a/b", "--default-prompt=q: ", "--default-prompt-name=query"}, nil, "cannot be used with"},
		{"no model id", []string{"--port=80"}, nil, "required arguments were not provided"},
		{"an unknown flag", []string{"--model-id=a/b", "--max-input-length=512"}, nil, "unexpected argument '--max-input-length=512' found"},
		{"a positional argument", []string{"--model-id=a/b", "extra"}, nil, "unexpected argument 'extra' found"},
		{"a flag given twice", []string{"--model-id=a/b", "--json-output", "--json-output"}, nil, "'--json-output' cannot be used multiple times"},
		{"the port given twice, long and short", []string{"--model-id=a/b", "--port=80", "-p", "81"}, nil, "'--port' cannot be used multiple times"},
		{"a value for a switch", []string{"--model-id=a/b", "--json-output=true"}, nil, "no more were expected"},
		{"a switch's variable that is not a boolean", []string{"--model-id=a/b"}, map[string]string{"JSON_OUTPUT": "yes"}, "value was not a boolean"},
		{"a missing value", []string{"--model-id"}, nil, "a value is required for '--model-id <MODEL_ID>'"},
		{"a port out of range", []string{"--model-id=a/b", "--port=70000"}, nil, "invalid value '70000' for '--port <PORT>'"},
		{"a number that is not", []string{"--model-id=a/b"}, map[string]string{"MAX_BATCH_TOKENS": "lots"}, "invalid value 'lots' for '--max-batch-tokens"},
		{"an unknown pooling", []string{"--model-id=a/b", "--pooling=max"}, nil, "possible values: cls, mean, splade, last-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := tei.Parse(tc.argv, tc.env)
			var usage *tei.UsageError
			g.Expect(errors.As(err, &usage)).To(BeTrue(), "TEI exits with status %d on this: %v", tei.UsageExitCode, err)
			g.Expect(usage.Message).To(ContainSubstring(tc.message))
		})
	}
}

func TestArgsHaveUniqueFlagsAndVariables(t *testing.T) {
	g := NewWithT(t)
	longs, envs := map[string]bool{}, map[string]bool{}
	for _, arg := range tei.Args {
		g.Expect(longs).NotTo(HaveKey(arg.Long))
		g.Expect(envs).NotTo(HaveKey(arg.Env))
		longs[arg.Long], envs[arg.Env] = true, true
	}
	g.Expect(tei.Args).To(HaveLen(28), "router/src/main.rs v1.9.3 declares 28 arguments")
}

func TestValueFallsBackToTEIDefaults(t *testing.T) {
	g := NewWithT(t)
	parsed, err := tei.Parse([]string{"--model-id=a/b", "--port=8080"}, map[string]string{"HF_API_TOKEN": "old"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed.Value("port")).To(Equal("8080"))
	g.Expect(parsed.Value("prometheus_port")).To(Equal("9000"))
	g.Expect(parsed.Value("hostname")).To(Equal("0.0.0.0"))
	_, given := parsed.Lookup("revision")
	g.Expect(given).To(BeFalse(), "no default: /info reports a null model_sha")
	g.Expect(parsed.HubToken()).To(Equal("old"), "the deprecated token when HF_TOKEN is not set")
	for id := range tei.Defaults {
		g.Expect(tei.Args).To(ContainElement(HaveField("ID", id)))
	}
}
