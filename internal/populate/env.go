package populate

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Environment variables populate reads, named and read as the HuggingFace
// clients read them. The proxy (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) and the
// certificate authorities (SSL_CERT_FILE, SSL_CERT_DIR) are read by the
// default client from the process environment instead (see Options.Client).
const (
	// EnvEndpoint names the variable that overrides the hub endpoint.
	EnvEndpoint = "HF_ENDPOINT"
	// EnvToken names the variable that holds the hub token.
	EnvToken = "HF_TOKEN"
	// EnvDownloadTimeout names the variable that sets, in whole seconds, how
	// long a download may wait for the hub's answer or for its next bytes:
	// huggingface_hub passes it as the timeout of a file's GET
	// (src/huggingface_hub/constants.py and file_download.py, http_get).
	// It sets Options.IdleTimeout.
	EnvDownloadTimeout = "HF_HUB_DOWNLOAD_TIMEOUT"
	// EnvETagTimeout names the variable that sets, in whole seconds, the
	// timeout of the HEAD request for a file's metadata (huggingface_hub
	// src/huggingface_hub/file_download.py, get_hf_file_metadata). It sets
	// Options.MetadataTimeout.
	EnvETagTimeout = "HF_HUB_ETAG_TIMEOUT"
)

// EnvOptions returns the options the environment sets, reading variables
// with getenv: Endpoint, Token, IdleTimeout and MetadataTimeout. A timeout
// that is unset or 0 is left zero, so populate's own default applies, as
// huggingface_hub falls back to its default for both ("_as_int(...) or
// DEFAULT_..._TIMEOUT", constants.py). A value that is not a whole number
// of seconds is refused, as huggingface_hub's int() refuses it.
func EnvOptions(getenv func(string) string) (Options, error) {
	opts := Options{Endpoint: getenv(EnvEndpoint), Token: getenv(EnvToken)}
	var err error
	if opts.IdleTimeout, err = envSeconds(getenv, EnvDownloadTimeout); err != nil {
		return Options{}, err
	}
	if opts.MetadataTimeout, err = envSeconds(getenv, EnvETagTimeout); err != nil {
		return Options{}, err
	}
	return opts, nil
}

// envSeconds reads a variable holding whole seconds; unset is zero.
func envSeconds(getenv func(string) string, name string) (time.Duration, error) {
	value := strings.TrimSpace(getenv(name))
	if value == "" {
		return 0, nil
	}
	seconds, err := strconv.ParseInt(value, 10, 32)
	if err != nil || seconds < 0 {
		return 0, fmt.Errorf("%w %s=%q: want whole seconds", ErrInvalid, name, getenv(name))
	}
	return time.Duration(seconds) * time.Second, nil
}
