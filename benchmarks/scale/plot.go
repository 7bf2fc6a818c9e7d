package main

import (
	"fmt"
	"image/color"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// palette: fleet's lines in strong colours, the plain client's dashed.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 255},
}

// plotProgress draws one chart per phase with progress series: objects against seconds, fleet
// and the plain client on the same axes.
func plotProgress(out, base string, r Run) error {
	for i, ph := range r.Phases {
		if len(ph.Series) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %d clusters (fleet %.1f s", ph.Name, r.Clusters, ph.Seconds)
		if ph.RawSeconds > 0 {
			p.Title.Text += fmt.Sprintf(", plain client %.1f s", ph.RawSeconds)
		}
		p.Title.Text += ")"
		p.X.Label.Text = "seconds since the experiment started"
		p.Y.Label.Text = "objects"
		// Bottom right: progress lines climb from the bottom left.
		p.Legend.Top, p.Legend.Left = false, false
		p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), vg.Points(10)
		for j, s := range ph.Series {
			pts := make(plotter.XYs, len(s.Seconds))
			for k := range s.Seconds {
				pts[k].X, pts[k].Y = s.Seconds[k], float64(s.Count[k])
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = palette[j%len(palette)]
			line.Width = vg.Points(1.5)
			if strings.HasPrefix(s.Name, "raw") {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(line)
			p.Legend.Add(s.Name, line)
		}
		p.Add(plotter.NewGrid())
		name := fmt.Sprintf("%s-%d-%s.png", base, i, slug(ph.Name))
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(out, name)); err != nil {
			return err
		}
	}
	return nil
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// point is one labelled value of a growth chart.
type point struct {
	x, y  float64
	label string
}

// plotGrowth draws how time and manager memory grow with N (registration storm, commit to Ready)
// and with BundleDeployments (creation, deletion).
func plotGrowth(out, size string, runs []Run) error {
	if len(runs) == 0 {
		return nil
	}
	byN := map[string][]point{}
	// Memory against N: at the same points of every size (the storm, the commit: one
	// BundleDeployment per cluster), and the size's whole run, which includes the creation
	// experiments where a size runs them.
	memN := map[string][]point{}
	byBD := map[string][]point{}
	memBD := []point{}
	for _, r := range runs {
		var peak float64
		for _, ph := range r.Phases {
			peak = max(peak, ph.PeakMiB)
			switch {
			case ph.Name == "registration storm", ph.Name == "commit to Ready (webhook)":
				byN[ph.Name] = append(byN[ph.Name], point{float64(r.Clusters), ph.Seconds, fmt.Sprintf("%.0f s", ph.Seconds)})
				line := "by the end of the " + strings.TrimSuffix(ph.Name, " (webhook)")
				memN[line] = append(memN[line], point{float64(r.Clusters), ph.PeakMiB, fmt.Sprintf("%.0f MiB", ph.PeakMiB)})
			case strings.HasPrefix(ph.Name, "create "):
				byBD["creation"] = append(byBD["creation"], point{float64(ph.Objects), ph.Seconds, fmt.Sprintf("%.0f s", ph.Seconds)})
				memBD = append(memBD, point{float64(ph.Objects), ph.PeakMiB, fmt.Sprintf("%.0f MiB", ph.PeakMiB)})
			case strings.HasPrefix(ph.Name, "delete "):
				byBD["deletion"] = append(byBD["deletion"], point{float64(ph.Objects), ph.Seconds, fmt.Sprintf("%.0f s", ph.Seconds)})
			}
		}
		memN["whole run (with its creation experiments)"] = append(memN["whole run (with its creation experiments)"], point{float64(r.Clusters), peak, fmt.Sprintf("%.0f MiB", peak)})
	}
	charts := []struct {
		file, title, x, y string
		lines             map[string][]point
	}{
		{"scale-growth-time-clusters", "time against clusters", "clusters (simulated agents)", "seconds", byN},
		{"scale-growth-memory-clusters", "manager peak RSS against clusters", "clusters (simulated agents)", "MiB", memN},
		{"scale-growth-time-bundledeployments", "time against BundleDeployments", "BundleDeployments", "seconds", byBD},
		{"scale-growth-memory-bundledeployments", "manager peak RSS against BundleDeployments", "BundleDeployments", "MiB", map[string][]point{"manager peak RSS (creation)": memBD}},
	}
	for _, c := range charts {
		// Every size a standard, 10k or full run has written so far is on one chart.
		name := c.file + ".png"
		if size == "small" {
			name = c.file + "-small.png"
		}
		if err := lineChart(filepath.Join(out, name), c.title, c.x, c.y, c.lines); err != nil {
			return err
		}
	}
	return nil
}

func lineChart(file, title, xl, yl string, lines map[string][]point) error {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xl, yl
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(10), -vg.Points(10)
	i := 0
	for _, name := range slices.Sorted(maps.Keys(lines)) {
		pts := lines[name]
		if len(pts) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(pts))
		labels := make([]string, len(pts))
		for k, pt := range pts {
			xys[k].X, xys[k].Y, labels[k] = pt.x, pt.y, pt.label
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = palette[i%len(palette)], palette[i%len(palette)]
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return err
		}
		p.Add(line, points, lbl)
		p.Legend.Add(name, line, points)
		i++
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}
