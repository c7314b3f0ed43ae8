package main

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestEmbeddingIsDeterministicAndNormalized(t *testing.T) {
	g := NewWithT(t)
	a := embedding("org/embed", "hello", 10, true)
	g.Expect(a).To(HaveLen(10))
	g.Expect(embedding("org/embed", "hello", 10, true)).To(Equal(a))
	g.Expect(embedding("org/other", "hello", 10, true)).NotTo(Equal(a), "another model, another vector")
	var norm float64
	for _, v := range a {
		norm += float64(v) * float64(v)
	}
	g.Expect(math.Sqrt(norm)).To(BeNumerically("~", 1, 1e-5))
	for _, v := range embedding("org/embed", "hello", 10, false) {
		g.Expect(v).To(BeNumerically(">=", -1))
		g.Expect(v).To(BeNumerically("<", 1))
	}
}

func TestEmbedRequestTexts(t *testing.T) {
	cases := []struct {
		inputs string
		want   []string
		err    string
	}{
		{`"one"`, []string{"one"}, ""},
		{`["a", "b"]`, []string{"a", "b"}, ""},
		{`[]`, nil, "`inputs` cannot be empty"},
		{`["a", "b", "c"]`, nil, "batch size 3 > maximum allowed batch size 2"},
		{`42`, nil, "want a string or a list of strings"},
	}
	for _, tc := range cases {
		t.Run(tc.inputs, func(t *testing.T) {
			g := NewWithT(t)
			texts, err := embedRequest{Inputs: json.RawMessage(tc.inputs)}.texts(2)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(texts).To(Equal(tc.want))
		})
	}
}

// A batch with a compute time keeps the backend computing that long and
// answers what one pass answers.
func TestBatchEmbeddingsComputeForTheSetTime(t *testing.T) {
	g := NewWithT(t)
	texts := []string{"a", "b"}
	const compute = 50 * time.Millisecond
	began := time.Now()
	out := batchEmbeddings("org/embed", texts, 8, true, compute)
	g.Expect(time.Since(began)).To(BeNumerically(">=", compute))
	g.Expect(out).To(Equal([][]float32{embedding("org/embed", "a", 8, true), embedding("org/embed", "b", 8, true)}))
	g.Expect(batchEmbeddings("org/embed", texts, 8, true, 0)).To(Equal(out), "without a compute time, one pass")
}
