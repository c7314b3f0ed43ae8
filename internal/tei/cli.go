package tei

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind is how an argument takes its value on the command line.
type Kind int

const (
	// Value takes exactly one value: --name=value or --name value
	// (ArgAction::Set, the derive default for String, numbers and enums).
	Value Kind = iota
	// Switch takes none (a bool field: ArgAction::SetTrue); from the
	// environment its value must be "true" or "false" (BoolValueParser).
	Switch
	// OptionalBool takes "true" or "false", or none for its
	// default_missing_value "true" (`num_args = 0..=1` on a bool).
	OptionalBool
)

// Arg is one argument of TEI's router, as its `#[clap(...)]` attribute
// declares it.
type Arg struct {
	// ID is the field name, which clap uses as the argument's id.
	ID string
	// Long is the long flag without its dashes.
	Long string
	// Short is the short flag, or 0.
	Short byte
	// Env is the variable clap reads when the flag is not given.
	Env string
	// Kind is how the flag takes its value.
	Kind Kind
	// Required is set on a field that is neither an Option nor defaulted.
	Required bool
	// Unsigned is set on usize and u16 fields; Max bounds a u16.
	Unsigned bool
	Max      uint64
	// Choices are a value_enum's values, in clap's kebab case.
	Choices []string
	// ConflictsWith are the ids of `conflicts_with`.
	ConflictsWith []string
}

// Args are the arguments of text-embeddings-router, from
// router/src/main.rs at v1.9.3 (what the cpu-1.9 tag the default image pins
// resolves to), in the file's order. The value enums are DType
// (backends/src/dtype.rs: float16 and float32 in the cpu and CUDA builds;
// bfloat16 exists only in the python backend's images, not modelled here)
// and Pool (backends/core/src/lib.rs).
var Args = []Arg{
	{ID: "model_id", Long: "model-id", Env: "MODEL_ID", Required: true},
	{ID: "revision", Long: "revision", Env: "REVISION"},
	{ID: "tokenization_workers", Long: "tokenization-workers", Env: "TOKENIZATION_WORKERS", Unsigned: true},
	{ID: "dtype", Long: "dtype", Env: "DTYPE", Choices: []string{"float16", "float32"}},
	{ID: "served_model_name", Long: "served-model-name", Env: "SERVED_MODEL_NAME"},
	{ID: "pooling", Long: "pooling", Env: "POOLING", Choices: []string{"cls", "mean", "splade", "last-token"}},
	{ID: "max_concurrent_requests", Long: "max-concurrent-requests", Env: "MAX_CONCURRENT_REQUESTS", Unsigned: true},
	{ID: "max_batch_tokens", Long: "max-batch-tokens", Env: "MAX_BATCH_TOKENS", Unsigned: true},
	{ID: "max_batch_requests", Long: "max-batch-requests", Env: "MAX_BATCH_REQUESTS", Unsigned: true},
	{ID: "max_client_batch_size", Long: "max-client-batch-size", Env: "MAX_CLIENT_BATCH_SIZE", Unsigned: true},
	{ID: "auto_truncate", Long: "auto-truncate", Env: "AUTO_TRUNCATE", Kind: OptionalBool},
	{ID: "default_prompt_name", Long: "default-prompt-name", Env: "DEFAULT_PROMPT_NAME", ConflictsWith: []string{"default_prompt"}},
	{ID: "default_prompt", Long: "default-prompt", Env: "DEFAULT_PROMPT", ConflictsWith: []string{"default_prompt_name"}},
	{ID: "dense_path", Long: "dense-path", Env: "DENSE_PATH"},
	{ID: "hf_api_token", Long: "hf-api-token", Env: "HF_API_TOKEN"},
	{ID: "hf_token", Long: "hf-token", Env: "HF_TOKEN", ConflictsWith: []string{"hf_api_token"}},
	{ID: "hostname", Long: "hostname", Env: "HOSTNAME"},
	{ID: "port", Long: "port", Short: 'p', Env: "PORT", Unsigned: true, Max: 65535},
	{ID: "uds_path", Long: "uds-path", Env: "UDS_PATH"},
	{ID: "huggingface_hub_cache", Long: "huggingface-hub-cache", Env: "HUGGINGFACE_HUB_CACHE"},
	{ID: "payload_limit", Long: "payload-limit", Env: "PAYLOAD_LIMIT", Unsigned: true},
	{ID: "api_key", Long: "api-key", Env: "API_KEY"},
	{ID: "json_output", Long: "json-output", Env: "JSON_OUTPUT", Kind: Switch},
	{ID: "disable_spans", Long: "disable-spans", Env: "DISABLE_SPANS", Kind: Switch},
	{ID: "otlp_endpoint", Long: "otlp-endpoint", Env: "OTLP_ENDPOINT"},
	{ID: "otlp_service_name", Long: "otlp-service-name", Env: "OTLP_SERVICE_NAME"},
	{ID: "prometheus_port", Long: "prometheus-port", Env: "PROMETHEUS_PORT", Unsigned: true, Max: 65535},
	{ID: "cors_allow_origin", Long: "cors-allow-origin", Env: "CORS_ALLOW_ORIGIN"},
}

// ImageEnv is the environment TEI's images set (Dockerfile and
// Dockerfile-cuda, v1.9.3, `ENV` of the base stage) that clap reads as
// arguments. The container runtime adds HOSTNAME, the pod's name.
var ImageEnv = map[string]string{
	"HUGGINGFACE_HUB_CACHE": "/data",
	"PORT":                  "80",
}

// UsageExitCode is the status clap exits with on a usage error
// (clap_builder error/mod.rs: USAGE_CODE).
const UsageExitCode = 2

// UsageError is a command line clap refuses: TEI prints it and exits with
// UsageExitCode before it does anything else.
type UsageError struct {
	// Message is clap's complaint, in its words.
	Message string
}

// Error returns the message.
func (e *UsageError) Error() string { return "error: " + e.Message }

// Source says where a parsed value came from.
type Source string

const (
	// CommandLine is a value from the arguments.
	CommandLine Source = "command line"
	// Environment is a value from the environment.
	Environment Source = "environment"
)

// Given is a parsed argument's value and its source.
type Given struct {
	Value  string
	Source Source
}

// Parsed maps the id of each argument given, on the command line or in the
// environment, to its value. Defaults are not filled in.
type Parsed map[string]Given

// Parse reads argv (without the program name) and env as clap 4 reads
// TEI's Args: a flag is known or refused; it is given at most once on the
// command line; an argument not on the command line is read from its
// variable; every value must parse as its field's type; conflicting
// arguments are refused whichever source gave them (clap counts a value
// from the environment as explicit, ValueSource::EnvVariable); and
// model_id is required. A refused command line is a *UsageError.
func Parse(argv []string, env map[string]string) (Parsed, error) {
	parsed, err := parseCommandLine(argv)
	if err != nil {
		return nil, err
	}
	if err := addEnvironment(parsed, env); err != nil {
		return nil, err
	}
	if err := checkConflicts(parsed); err != nil {
		return nil, err
	}
	for _, arg := range Args {
		if _, ok := parsed[arg.ID]; arg.Required && !ok {
			return nil, usage("the following required arguments were not provided:\n  --%s <%s>", arg.Long, arg.Env)
		}
	}
	return parsed, nil
}

// parseCommandLine reads the flags of argv.
func parseCommandLine(argv []string) (Parsed, error) {
	parsed := Parsed{}
	for i := 0; i < len(argv); i++ {
		arg, value, hasValue, err := lookup(argv[i])
		if err != nil {
			return nil, err
		}
		if _, seen := parsed[arg.ID]; seen {
			return nil, usage("the argument '--%s' cannot be used multiple times", arg.Long)
		}
		if arg.Kind == Value && !hasValue {
			if i+1 >= len(argv) {
				return nil, usage("a value is required for '--%s <%s>' but none was supplied", arg.Long, arg.Env)
			}
			i++
			value, hasValue = argv[i], true
		}
		value, err = commandLineValue(arg, value, hasValue)
		if err != nil {
			return nil, err
		}
		parsed[arg.ID] = Given{Value: value, Source: CommandLine}
	}
	return parsed, nil
}

// lookup finds the argument of one command-line word, with the value
// attached to it ("--name=value", "-pvalue", "-p=value").
func lookup(word string) (Arg, string, bool, error) {
	if long, ok := strings.CutPrefix(word, "--"); ok && long != "" {
		name, value, hasValue := strings.Cut(long, "=")
		for _, arg := range Args {
			if arg.Long == name {
				return arg, value, hasValue, nil
			}
		}
	} else if short, ok := strings.CutPrefix(word, "-"); ok && short != "" && short[0] != '-' {
		for _, arg := range Args {
			if arg.Short == short[0] {
				value := strings.TrimPrefix(short[1:], "=")
				return arg, value, len(short) > 1, nil
			}
		}
	}
	return Arg{}, "", false, usage("unexpected argument '%s' found", word)
}

// commandLineValue checks the value given to arg on the command line.
func commandLineValue(arg Arg, value string, hasValue bool) (string, error) {
	switch arg.Kind {
	case Switch:
		if hasValue {
			return "", usage("unexpected value '%s' for '--%s' found; no more were expected", value, arg.Long)
		}
		return "true", nil
	case OptionalBool:
		if !hasValue {
			return "true", nil
		}
	}
	return value, checkValue(arg, value)
}

// addEnvironment reads the variables of the arguments not on the command
// line.
func addEnvironment(parsed Parsed, env map[string]string) error {
	for _, arg := range Args {
		if _, given := parsed[arg.ID]; given {
			continue
		}
		value, ok := env[arg.Env]
		if !ok {
			continue
		}
		if err := checkValue(arg, value); err != nil {
			return err
		}
		parsed[arg.ID] = Given{Value: value, Source: Environment}
	}
	return nil
}

// checkValue parses value as arg's field type.
func checkValue(arg Arg, value string) error {
	switch {
	case arg.Kind != Value:
		if value != "true" && value != "false" {
			return usage("invalid value '%s' for '--%s': value was not a boolean", value, arg.Long)
		}
	case arg.Unsigned:
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil || (arg.Max > 0 && n > arg.Max) {
			return usage("invalid value '%s' for '--%s <%s>': invalid digit found in string or out of range", value, arg.Long, arg.Env)
		}
	case len(arg.Choices) > 0:
		if !slices.Contains(arg.Choices, value) {
			return usage("invalid value '%s' for '--%s <%s>'\n  [possible values: %s]", value, arg.Long, arg.Env, strings.Join(arg.Choices, ", "))
		}
	}
	return nil
}

// checkConflicts refuses two given arguments that conflict.
func checkConflicts(parsed Parsed) error {
	for _, arg := range Args {
		if _, given := parsed[arg.ID]; !given {
			continue
		}
		for _, other := range arg.ConflictsWith {
			if _, given := parsed[other]; given {
				return usage("the argument '--%s <%s>' cannot be used with '--%s <%s>'",
					arg.Long, arg.Env, byID(other).Long, byID(other).Env)
			}
		}
	}
	return nil
}

// byID returns the argument with id.
func byID(id string) Arg {
	for _, arg := range Args {
		if arg.ID == id {
			return arg
		}
	}
	panic("tei: no argument " + id)
}

func usage(format string, a ...any) error {
	return &UsageError{Message: fmt.Sprintf(format, a...)}
}
