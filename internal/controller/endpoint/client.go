package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// DefaultTimeout bounds one /info request, connection included, so a
// silent pod holds a reconcile worker only briefly.
const DefaultTimeout = 5 * time.Second

// maxInfoBytes caps the /info body read; TEI's answer is well under 4 KiB.
const maxInfoBytes = 1 << 20

// Endpoint check modes of the --endpoint-check flag.
const (
	// CheckAuto turns the check on when the controller runs in a
	// cluster, where Service addresses resolve, and off outside.
	CheckAuto = "auto"
	// CheckOn always asks ready pods for /info.
	CheckOn = "on"
	// CheckOff never asks.
	CheckOff = "off"
)

// ResolveCheck turns an --endpoint-check mode into whether the check
// runs; inCluster is consulted for auto only.
func ResolveCheck(mode string, inCluster func() bool) (bool, error) {
	switch mode {
	case CheckOn:
		return true, nil
	case CheckOff:
		return false, nil
	case CheckAuto, "":
		return inCluster(), nil
	default:
		return false, fmt.Errorf("endpoint check mode %q is not one of %s, %s, %s", mode, CheckAuto, CheckOn, CheckOff)
	}
}

// InCluster is true when the process runs in a pod with a service account,
// the only place where cluster Service names resolve.
func InCluster() bool {
	_, err := rest.InClusterConfig()
	return err == nil
}

// Client asks a TEI server what it serves.
type Client interface {
	// Info returns the answer of TEI's /info at url. A non-empty apiKey is
	// sent as "Authorization: Bearer <apiKey>", which TEI requires on /info
	// when started with an API key (TEI router/src/http/server.rs).
	Info(ctx context.Context, url, apiKey string) (*embedopsv1.ServedModel, error)
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// NewClient returns an Client over HTTP with
// DefaultTimeout. dial replaces the dialer when not nil, so tests
// reach a stand-in server whatever the URL's host.
func NewClient(dial DialFunc) Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // Service addresses are cluster-internal.
	if dial != nil {
		transport.DialContext = dial
	}
	return &httpClient{client: &http.Client{Transport: transport, Timeout: DefaultTimeout}}
}

// httpClient is the Client of NewClient.
type httpClient struct {
	client *http.Client
}

// Info GETs url and parses TEI's answer.
func (c *httpClient) Info(ctx context.Context, url, apiKey string) (*embedopsv1.ServedModel, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building the /info request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking /info: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxInfoBytes))
	if err != nil {
		return nil, fmt.Errorf("reading /info: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && apiKey == "":
		return nil, fmt.Errorf("/info answered %s: TEI wants an API key the server's spec does not show (API_KEY in spec.env or --api-key in spec.args)", resp.Status)
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("/info answered %s: TEI refused the server's API key", resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("/info answered %s", resp.Status)
	}
	return ParseInfo(body)
}

// teiInfo is the part of TEI's /info answer embedops records; TEI sends more.
type teiInfo struct {
	ModelID        *string `json:"model_id"`
	ModelSHA       string  `json:"model_sha"`
	ModelDType     string  `json:"model_dtype"`
	MaxInputLength int64   `json:"max_input_length"`
}

// ParseInfo reads TEI's /info JSON; model_id is required, the rest optional,
// unknown fields are ignored.
func ParseInfo(body []byte) (*embedopsv1.ServedModel, error) {
	var info teiInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("parsing /info: %w", err)
	}
	if info.ModelID == nil || *info.ModelID == "" {
		return nil, errors.New("parsing /info: no model_id")
	}
	return &embedopsv1.ServedModel{
		ModelID:        *info.ModelID,
		ModelSHA:       info.ModelSHA,
		DType:          info.ModelDType,
		MaxInputLength: info.MaxInputLength,
	}, nil
}

// DialTo is a DialFunc that reaches address whatever was asked for, so a
// stand-in TEI on loopback answers for a Service's name.
func DialTo(address string) DialFunc {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, network, address)
	}
}
