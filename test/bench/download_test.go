package bench

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestMeasureDownloadTimesPlainGETsAndPopulate(t *testing.T) {
	g := NewWithT(t)

	report, err := MeasureDownload(t.Context(), DownloadOptions{Bytes: 4 << 20, Files: 2})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(report.Files).To(Equal(3), "config.json and two weight files")
	g.Expect(report.Bytes).To(BeNumerically(">=", 4<<20))
	g.Expect(report.PlainSeconds).To(BeNumerically(">", 0))
	g.Expect(report.PopulateSeconds).To(BeNumerically(">", 0))
	g.Expect(report.SerialSeconds).To(BeNumerically(">", 0))
	g.Expect(report.Ratio).To(BeNumerically("~", report.PlainSeconds/report.PopulateSeconds, 1e-9))
	g.Expect(report.Rows()).To(HaveLen(4))
}

func TestMeasureDownloadRefusesAnEmptyRepository(t *testing.T) {
	_, err := MeasureDownload(t.Context(), DownloadOptions{Bytes: 10, Files: 0})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("at least one file")))
}
