package controller

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheckProxyURLTakesWhatTEIAndGoTake(t *testing.T) {
	for _, value := range []string{"http://proxy.corp:3128", "proxy.corp:3128", "https://user:pw@proxy.corp", "socks5h://[fd00::1]:1080", "http://proxy/"} {
		NewWithT(t).Expect(checkProxyURL(value)).To(Succeed(), value)
	}
	for value, problem := range map[string]string{
		"ftp://proxy:21":        `scheme "ftp"`,
		"http://":               "no proxy host",
		"http://proxy:3128/x y": "no spaces",
		"http://proxy:3128/x":   "no path",
		"htp//proxy":            "no path",
	} {
		NewWithT(t).Expect(checkProxyURL(value)).To(MatchError(ContainSubstring(problem)), value)
	}
}
