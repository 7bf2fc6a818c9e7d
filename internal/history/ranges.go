package history

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Ranges is a set of indexes into a record's cluster table, written as sorted runs ("0-165,170,
// 172-200"), or, where that is shorter (clusters scattered over the table, as a label selects
// them), as a bitmap from the first index: "b<first>:<base64 of the bits>". Clusters a pass
// sees together are mostly neighbours in the table, so a span of thousands of clusters takes a
// few bytes, and never more than a bit per cluster of the table.
type Ranges string

// bitmapOf writes sorted idx as a bitmap from its first index.
func bitmapOf(s []int) Ranges {
	first := s[0]
	bits := make([]byte, (s[len(s)-1]-first)/8+1)
	for _, i := range s {
		bits[(i-first)/8] |= 1 << ((i - first) % 8)
	}
	return Ranges("b" + strconv.Itoa(first) + ":" + base64.RawURLEncoding.EncodeToString(bits))
}

// bitmapIndexes reads what bitmapOf wrote (without its "b"), each index below n.
func bitmapIndexes(r string, n int) ([]int, error) {
	first, bits, err := bitmap(r)
	if err != nil {
		return nil, err
	}
	if first+8*len(bits) > n+7 {
		return nil, fmt.Errorf("cluster bitmap: it runs past the %d clusters of the table", n)
	}
	var out []int
	for b, v := range bits {
		for k := range 8 {
			if v&(1<<k) != 0 {
				out = append(out, first+8*b+k)
			}
		}
	}
	return out, nil
}

// rangesOf writes idx (any order, no duplicates) as Ranges.
func rangesOf(idx []int) Ranges {
	if len(idx) == 0 {
		return ""
	}
	s := slices.Clone(idx)
	slices.Sort(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	if bm := bitmapOf(s); len(bm) < b.Len() {
		return bm
	}
	return Ranges(b.String())
}

// Indexes are the indexes r holds, in order; each must be below n, the size of the table they
// index (a span is input: whoever may write its object could otherwise make the reader hold
// billions of them).
func (r Ranges) Indexes(n int) ([]int, error) {
	if r == "" {
		return nil, nil
	}
	if strings.HasPrefix(string(r), "b") {
		return bitmapIndexes(string(r[1:]), n)
	}
	var out []int
	for _, part := range strings.Split(string(r), ",") {
		lo, hi, isRun := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cluster range %q: %q is no index", r, part)
		}
		b := a
		if isRun {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cluster range %q: %q is no run", r, part)
			}
		}
		if len(out) > 0 && a <= out[len(out)-1] {
			return nil, fmt.Errorf("cluster range %q: runs out of order", r)
		}
		if b >= n {
			return nil, fmt.Errorf("cluster range %q: index %d is past the %d clusters of the table", r, b, n)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// bitmap is a bitmap's first index and bits.
func bitmap(r string) (int, []byte, error) {
	lo, enc, ok := strings.Cut(r, ":")
	first, err := strconv.Atoi(lo)
	if !ok || err != nil || first < 0 {
		return 0, nil, fmt.Errorf("cluster bitmap %q: no first index", r)
	}
	bits, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return 0, nil, fmt.Errorf("cluster bitmap %q: %w", r, err)
	}
	return first, bits, nil
}

// Has reports whether r holds index i.
func (r Ranges) Has(i int) bool {
	if strings.HasPrefix(string(r), "b") {
		first, bits, err := bitmap(string(r[1:]))
		if err != nil || i < first || (i-first)/8 >= len(bits) {
			return false
		}
		return bits[(i-first)/8]&(1<<((i-first)%8)) != 0
	}
	for _, part := range strings.Split(string(r), ",") {
		lo, hi, isRun := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return false
		}
		b := a
		if isRun {
			b, _ = strconv.Atoi(hi)
		}
		if i >= a && i <= b {
			return true
		}
	}
	return false
}
