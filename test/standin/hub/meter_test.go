package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

// tinyModel is a models file of one model: two small regular files and an
// LFS file of size bytes.
func tinyModel(t *testing.T, size int) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "models.json")
	spec := `{"models": [{"id": "org/tiny", "files": [
		{"name": "config.json", "content": "{\"model_type\": \"bert\"}"},
		{"name": "tokenizer.json", "content": "{}"},
		{"name": "model.safetensors", "size": ` + strconv.Itoa(size) + `, "lfs": true}]}]}`
	NewWithT(t).Expect(os.WriteFile(file, []byte(spec), 0o600)).To(Succeed())
	return file
}

// servedBytes GETs the hub's count of file bytes by client IP.
func servedBytes(t *testing.T, url string) map[string]int64 {
	t.Helper()
	g := NewWithT(t)
	resp, err := http.Get(url + bytesPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	counts := map[string]int64{}
	g.Expect(json.NewDecoder(resp.Body).Decode(&counts)).To(Succeed())
	return counts
}

// get GETs url with client and returns the status and the body.
func get(t *testing.T, client *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, body
}

func TestCountsTheFileBytesEachClientReceived(t *testing.T) {
	g := NewWithT(t)
	url, _ := serving(t, options{addr: "127.0.0.1:0", modelsFile: tinyModel(t, 4096)})
	g.Expect(servedBytes(t, url)).To(BeEmpty())

	result, err := populate.Run(context.Background(), populate.Options{
		Model: "org/tiny", Dir: t.TempDir(), Endpoint: url, Image: "text-embeddings-inference:1.9", MaxAttempts: 1,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Bytes).To(BeNumerically(">", 4096))
	g.Expect(servedBytes(t, url)).To(Equal(map[string]int64{"127.0.0.1": result.Bytes}),
		"every file populate wrote, once; not the listings or the LFS redirect")

	status, _ := get(t, http.DefaultClient, url+"/org/tiny/resolve/main/absent.json")
	g.Expect(status).To(Equal(http.StatusNotFound))
	status, _ = get(t, http.DefaultClient, url+"/api/models/org/tiny/revision/main?blobs=true")
	g.Expect(status).To(Equal(http.StatusOK))
	head, err := http.Head(url + "/org/tiny/resolve/main/config.json")
	g.Expect(err).NotTo(HaveOccurred())
	_ = head.Body.Close()
	g.Expect(servedBytes(t, url)).To(Equal(map[string]int64{"127.0.0.1": result.Bytes}),
		"errors, listings and HEAD send no file bytes")

	req, err := http.NewRequest(http.MethodGet, url+"/org/tiny/resolve/main/config.json", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Range", "bytes=2-5")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusPartialContent))
	g.Expect(servedBytes(t, url)).To(Equal(map[string]int64{"127.0.0.1": result.Bytes + 4}), "a range counts what it sent")
}

func TestCountsEachClientAddressApart(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux routes all of 127.0.0.0/8 to loopback")
	}
	g := NewWithT(t)
	url, _ := serving(t, options{addr: "127.0.0.1:0", modelsFile: tinyModel(t, 1000)})
	other := &http.Client{Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	status, body := get(t, other, url+"/org/tiny/resolve/main/model.safetensors")
	g.Expect(status).To(Equal(http.StatusOK), "through the redirect to the LFS content")
	g.Expect(body).To(HaveLen(1000))
	status, body = get(t, http.DefaultClient, url+"/org/tiny/resolve/main/config.json")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(servedBytes(t, url)).To(Equal(map[string]int64{"127.0.0.2": 1000, "127.0.0.1": int64(len(body))}))
}

func TestBoundsTheRateOfEachFileResponse(t *testing.T) {
	g := NewWithT(t)
	const size, rate = 256 << 10, 1 << 20
	url, _ := serving(t, options{addr: "127.0.0.1:0", modelsFile: tinyModel(t, size), rateBytesPerSecond: rate})

	began := time.Now()
	resp, err := http.Get(url + "/org/tiny/resolve/main/model.safetensors")
	g.Expect(err).NotTo(HaveOccurred())
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(began)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	sum := sha256.Sum256(body)
	g.Expect(strconv.Quote(hex.EncodeToString(sum[:]))).To(Equal(resp.Request.Response.Header.Get("X-Linked-Etag")), "the content is whole")
	// The limiter starts with one burst and adds rate bytes a second: no
	// faster than that, however fast the machine.
	g.Expect(took).To(BeNumerically(">=", time.Duration(float64(size-rateBurst)/rate*float64(time.Second))))
	g.Expect(servedBytes(t, url)).To(Equal(map[string]int64{"127.0.0.1": size}))
}
