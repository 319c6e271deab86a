package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
)

// Series is one line of a Chart; NaN values are gaps.
type Series struct {
	Name, Color string
	Y           []float64
}

// Chart is a line chart over categorical x values, written as SVG by hand
// (no plotting dependency).
type Chart struct {
	Title, XLabel, YLabel string
	X                     []string
	Series                []Series
	// LogY uses a logarithmic y axis (for latencies spanning decades).
	LogY bool
	// YFormat formats tick labels and point tooltips; default %g.
	YFormat func(float64) string
}

// Geometry of every chart, in SVG user units.
const (
	chartW, chartH = 720.0, 420.0
	plotL, plotR   = 84.0, chartW - 150
	plotT, plotB   = 48.0, chartH - 64
)

// Colors of the two servers in every chart.
const (
	EtcdColor = "#1f77b4"
	RevdColor = "#e4572e"
)

// SVG renders the chart.
func (c *Chart) SVG() []byte {
	format := c.YFormat
	if format == nil {
		format = func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="#ffffff"/>`+"\n", chartW, chartH)
	text(&b, chartW/2, 24, "middle", 15, "bold", c.Title)

	lo, hi, ticks, ok := c.yScale()
	if !ok {
		text(&b, (plotL+plotR)/2, (plotT+plotB)/2, "middle", 13, "", "no data")
		b.WriteString("</svg>\n")
		return b.Bytes()
	}
	y := func(v float64) float64 {
		if c.LogY {
			return plotB - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(plotB-plotT)
		}
		return plotB - (v-lo)/(hi-lo)*(plotB-plotT)
	}
	step := (plotR - plotL) / float64(max(1, len(c.X)))
	x := func(i int) float64 { return plotL + (float64(i)+0.5)*step }

	// Grid and y ticks.
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", plotL, y(t), plotR, y(t))
		text(&b, plotL-6, y(t)+4, "end", 11, "", format(t))
	}
	// Axes.
	fmt.Fprintf(&b, `<polyline points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="#333333"/>`+"\n",
		plotL, plotT, plotL, plotB, plotR, plotB)
	for i, l := range c.X {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333333"/>`+"\n", x(i), plotB, x(i), plotB+4)
		text(&b, x(i), plotB+18, "middle", 11, "", l)
	}
	text(&b, (plotL+plotR)/2, chartH-22, "middle", 12, "", c.XLabel)
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" font-size="12" transform="rotate(-90 18 %.1f)">%s</text>`+"\n",
		(plotT+plotB)/2, (plotT+plotB)/2, esc(c.YLabel))

	// Series: polylines broken at gaps, a dot with a tooltip per point.
	for _, s := range c.Series {
		var seg []string
		flush := func() {
			if len(seg) > 1 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", join(seg), s.Color)
			}
			seg = seg[:0]
		}
		for i, v := range s.Y {
			if !c.plottable(v) || i >= len(c.X) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		flush()
		for i, v := range s.Y {
			if c.plottable(v) && i < len(c.X) {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s: %s</title></circle>`+"\n",
					x(i), y(v), s.Color, esc(s.Name), esc(c.X[i]), esc(format(v)))
			}
		}
	}
	// Legend.
	for i, s := range c.Series {
		ly := plotT + 10 + float64(i)*22
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", plotR+16, ly, plotR+40, ly, s.Color)
		text(&b, plotR+46, ly+4, "start", 12, "", s.Name)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// plottable: finite, and positive on a log axis.
func (c *Chart) plottable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!c.LogY || v > 0)
}

// yScale picks the axis range and ticks: from 0 to a round maximum on a
// linear axis, whole decades (with 2 and 5 in between if few) on a log
// axis.
func (c *Chart) yScale() (lo, hi float64, ticks []float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for i, v := range s.Y {
			if c.plottable(v) && i < len(c.X) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 0, nil, false
	}
	if c.LogY {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if hi <= lo {
			hi = lo * 10
		}
		decades := math.Round(math.Log10(hi / lo))
		for d := lo; d <= hi*1.0001; d *= 10 {
			ticks = append(ticks, d)
			if decades <= 2 && d < hi*0.999 {
				ticks = append(ticks, 2*d, 5*d)
			}
		}
		return lo, hi, ticks, true
	}
	if hi <= 0 {
		hi = 1
	}
	step := niceStep(hi / 5)
	hi = math.Ceil(hi/step) * step
	for t := 0.0; t <= hi+step/2; t += step {
		ticks = append(ticks, t)
	}
	return 0, hi, ticks, true
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func text(b *bytes.Buffer, x, y float64, anchor string, size int, weight, s string) {
	w := ""
	if weight != "" {
		w = ` font-weight="` + weight + `"`
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d"%s>%s</text>`+"\n", x, y, anchor, size, w, esc(s))
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func join(pts []string) string {
	var b bytes.Buffer
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String()
}
