// Command podcheck runs in the real node's test pods, as a static binary on
// an empty base image:
//
//	podcheck write PATH            writes $CONTENT to PATH (an init container)
//	podcheck serve ADDR PATH       serves /ready (200 once PATH is readable)
//	podcheck cluster SERVICE_URL   asks the API server who it is through
//	                               the kubernetes Service with its
//	                               ServiceAccount token, then GETs SERVICE_URL
//	                               through cluster DNS
//	podcheck fill PATH BYTES       writes BYTES bytes to PATH and reports
//	                               the room left on its filesystem
//	podcheck owners DIR            reports, as JSON, DIR's owner and mode and
//	                               how many entries below it each owner has
//	podcheck load URL INTERVAL ADDR
//	                               POSTs to URL every INTERVAL and serves
//	                               the counts at http://ADDR/stats
//
// Every command writes what it found to /dev/termination-log (the pod's
// terminationMessagePath) and stdout.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// serviceAccountDir is where the kubelet projects the pod's token and CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: podcheck write|serve|cluster|fill|owners|load [arguments]"))
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "write":
		err = write(args)
	case "serve":
		err = serve(args)
	case "cluster":
		err = cluster(args)
	case "fill":
		err = fill(args)
	case "owners":
		err = owners(args)
	case "load":
		err = load(args)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

// waitForSignal waits for SIGTERM or SIGINT.
func waitForSignal() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
}

// write writes $CONTENT to the path and reports who wrote it.
func write(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: podcheck write PATH")
	}
	if err := os.WriteFile(args[0], []byte(os.Getenv("CONTENT")), 0o640); err != nil {
		return err
	}
	info, err := os.Stat(args[0])
	if err != nil {
		return err
	}
	st := info.Sys().(*syscall.Stat_t)
	report(fmt.Sprintf("wrote %s as uid %d: owner %d group %d", args[0], os.Getuid(), st.Uid, st.Gid))
	return nil
}

// serve answers /ready once the path is readable, until SIGTERM.
func serve(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: podcheck serve ADDR PATH")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.ReadFile(args[1]); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	server := &http.Server{Addr: args[0], Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		waitForSignal()
		report("stopped on SIGTERM")
		_ = server.Shutdown(context.Background())
	}()
	if err := server.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// cluster reaches the API server through the kubernetes Service and a
// Service through cluster DNS.
func cluster(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: podcheck cluster SERVICE_URL")
	}
	user, err := whoAmI()
	if err != nil {
		return fmt.Errorf("asking the API server: %w", err)
	}
	target, err := url.Parse(args[0])
	if err != nil {
		return err
	}
	addrs, err := net.DefaultResolver.LookupHost(context.Background(), target.Hostname())
	if err != nil {
		return fmt.Errorf("resolving %s: %w", target.Hostname(), err)
	}
	status, attempts, err := getUntilAnswered(args[0])
	if err != nil {
		return err
	}
	report(fmt.Sprintf("api server user %s; %s resolved to %s; GET %s: %d (attempt %d)", user, target.Hostname(), strings.Join(addrs, ","), args[0], status, attempts))
	return nil
}

// Retrying the Service: kube-proxy programs a new Service's rules
// asynchronously (pkg/proxy/iptables/proxier.go, v1.37.2: syncProxyRules runs
// at most every minSyncPeriod after a change, later on a loaded node), and
// until it has, a packet to the ClusterIP follows the node's routes, of
// which this node has none: "network is unreachable". Every client of a new
// Service retries; so does this one, within serviceDeadline.
const (
	serviceDeadline = time.Minute
	serviceInterval = 500 * time.Millisecond
)

// getUntilAnswered GETs url until a response arrives or serviceDeadline
// passes, and returns its status and the number of attempts.
func getUntilAnswered(url string) (status, attempts int, err error) {
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(serviceDeadline)
	for {
		attempts++
		resp, err := client.Get(url) //nolint:noctx // bounded by the client's timeout
		if err == nil {
			_ = resp.Body.Close()
			return resp.StatusCode, attempts, nil
		}
		if time.Now().After(deadline) {
			return 0, attempts, fmt.Errorf("after %d attempts in %s: %w", attempts, serviceDeadline, err)
		}
		time.Sleep(serviceInterval)
	}
}

// whoAmI posts a SelfSubjectReview to https://kubernetes.default.svc with
// the pod's ServiceAccount token and returns the user it names.
func whoAmI() (string, error) {
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	req, err := http.NewRequest(http.MethodPost, "https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewBufferString(body)) //nolint:noctx // bounded by the client's timeout
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &review); err != nil {
		return "", fmt.Errorf("decoding the review: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// report writes the message to the termination log and stdout.
func report(message string) {
	fmt.Println(message)
	_ = os.WriteFile("/dev/termination-log", []byte(message), 0o644)
}

// fail reports the error and exits 1.
func fail(err error) {
	report("podcheck: " + err.Error())
	os.Exit(1)
}
