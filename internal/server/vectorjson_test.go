package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// oldBody makes values of body type T as it was before jsonVector
// (cf105be): encoding/json's []float32 in place of the jsonVector field,
// the twin plainBody builds (TestOldBodiesMirrorToday checks it field by
// field against today's type). The malformed-input table compares their
// answers with today's.
func oldBody[T any]() func() any {
	typ := reflect.TypeOf(plainBody(new(T))).Elem()
	return func() any { return reflect.New(typ).Interface() }
}

// bodyPairs are today's body types beside their old twins.
var bodyPairs = []struct {
	name, field string
	now, old    func() any
}{
	{"add", "embedding", func() any { return &addBody{} }, oldBody[addBody]()},
	{"update", "embedding", func() any { return &updateBody{} }, oldBody[updateBody]()},
	{"search", "vector", func() any { return &searchBody{} }, oldBody[searchBody]()},
}

// TestOldBodiesMirrorToday: the old twins have today's fields, tags and
// types but for the vector, so the table below compares like with like.
func TestOldBodiesMirrorToday(t *testing.T) {
	for _, pair := range bodyPairs {
		now, old := reflect.TypeOf(pair.now()).Elem(), reflect.TypeOf(pair.old()).Elem()
		if now.NumField() != old.NumField() {
			t.Fatalf("%s: %d fields today, %d in the old twin", pair.name, now.NumField(), old.NumField())
		}
		vectors := 0
		for i := range now.NumField() {
			n, o := now.Field(i), old.Field(i)
			if n.Name != o.Name || n.Tag != o.Tag {
				t.Fatalf("%s field %d: %s %q today, %s %q in the twin", pair.name, i, n.Name, n.Tag, o.Name, o.Tag)
			}
			switch {
			case n.Type == reflect.TypeFor[jsonVector]() && o.Type == reflect.TypeFor[[]float32]():
				vectors++
			case n.Type != o.Type:
				t.Fatalf("%s field %s: %s today, %s in the twin", pair.name, n.Name, n.Type, o.Type)
			}
		}
		if vectors != 1 {
			t.Fatalf("%s: %d vector fields, want 1", pair.name, vectors)
		}
	}
}

// TestJSONVectorAnswersAsBefore: for every body with a vector, valid or
// not, decodeStrict gives the same problem (status, type, detail, field
// errors) or the same decoded value as the old []float32 bodies.
func TestJSONVectorAnswersAsBefore(t *testing.T) {
	vectors := []string{
		// valid
		`[]`, `[ ]`, `[0]`, `[1,2,3]`, ` [ 1 , -2.5e-3 ,3E+2 ] `, "[\n\t1,\r\n2]", `[-0]`, `[1e-50]`, `[3.4028235e38]`,
		`[3.40282356e38]`, `[123456789012345678901234567890]`, `[0.1, 0.2, 0.30000000000000004]`, `[1.401298464324817e-45]`,
		// decoded by encoding/json (null elements are zeros), not by the fast path
		`null`, `[null]`, `[1,null,2]`,
		// refused: 422 naming the field
		`"x"`, `true`, `1`, `{}`, `{"a":1}`, `[true]`, `["1"]`, `[1,"2"]`, `[[1]]`, `[{}]`, `[1e39]`, `[-1e39]`, `[1e400]`,
		`[3.4028236e38]`, `[1, 2, 1e39, "x"]`,
		// refused: 400 (not JSON)
		`[NaN]`, `[Infinity]`, `[-Inf]`, `[1,]`, `[1 2]`, `[01]`, `[1.]`, `[.5]`, `[+1]`, `[1,2`, `[0x10]`, `[1_000]`,
		`[-]`, `[1e]`, `[1e+]`, `[-01]`, `[1.5.2]`, `[1e5e5]`, `[--1]`, `[1-2]`, `[1+2]`, `[0.]`, `[-.5]`, `[1E-]`,
	}
	long := "[" + strings.Repeat("0.125,", 4999) + "1]"
	vectors = append(vectors, long, "["+strings.Repeat("1e39,", 99)+"1]")
	answers := map[int]int{} // by status, 0 for decoded
	for _, pair := range bodyPairs {
		for _, vec := range vectors {
			bodies := vectorBodies(pair.field, vec)
			for _, body := range bodies {
				for _, prefix := range []string{"", "items[1]"} {
					now, old := pair.now(), pair.old()
					pNow, pOld := decodeStrict([]byte(body), now, prefix), decodeStrict([]byte(body), old, prefix)
					if !reflect.DeepEqual(pNow, pOld) {
						t.Fatalf("%s %.80s (prefix %q):\n now %+v\n was %+v", pair.name, body, prefix, pNow, pOld)
					}
					if pNow == nil && !sameDecoded(now, old) {
						t.Fatalf("%s %.80s: decoded %+v, was %+v", pair.name, body, now, old)
					}
					if pNow != nil {
						answers[pNow.Status]++
					} else {
						answers[0]++
					}
				}
			}
		}
	}
	if answers[0] == 0 || answers[400] == 0 || answers[422] == 0 || len(answers) != 3 {
		t.Fatalf("answers by status %v: want decoded bodies, 400s and 422s and nothing else", answers)
	}
	// The first error of the body is the one answered, as before: a type
	// error before a refused vector wins over it.
	p := decodeStrict([]byte(`{"tags":"x","vector":[true]}`), &searchBody{}, "")
	if p == nil || len(p.Errors) != 1 || p.Errors[0].Field != "tags" {
		t.Fatalf("tags then a bad vector: %+v, want the error on tags", p)
	}
	p = decodeStrict([]byte(`{"vector":[1e39]}`), &searchBody{}, "items[2]")
	if p == nil || len(p.Errors) != 1 || p.Errors[0].Field != "items[2].vector" ||
		p.Errors[0].Message != "must be a number within the range of float32, got number 1e39" {
		t.Fatalf("a number beyond float32: %+v", p)
	}
}

// vectorBodies are bodies with vec as the member field, in the places and
// spellings that matter to decodeLifted and to encoding/json.
func vectorBodies(field, vec string) []string {
	text, list := "content", "tags"
	if field == "vector" {
		text, list = "query", "categories"
	}
	escaped := fmt.Sprintf(`\u%04x%s`, field[0], field[1:])
	r := strings.NewReplacer("F", field, "V", vec, "T", text, "L", list, "U", strings.ToUpper(field[:1])+field[1:], "E", escaped)
	templates := []string{
		// decodeLifted: first, last, only, between, with spaces and a
		// string that looks like the member
		`{"T":"c","F":V}`, `{"F":V,"T":"c"}`, `{"F":V}`, ` { "L" : ["a,]}\"F\":[1]"] , "F" : V , "T":"c" } `,
		"{\n\t\"T\": \"c\",\r\n  \"F\":\tV\n}", `{"T":"c","F":V,"L":["F"]}`,
		// the ordinary path: other letter case, an escaped key, twice, nested
		`{"T":"c","U":V}`, `{"E":V}`, `{"F":[1],"F":V}`, `{"F":V,"F":[2]}`, `{"T":"c","metadata":{"F":V}}`,
		// a type error before the vector, an unknown field before and
		// after it, data after the object
		`{"L":"x","F":V}`, `{"zz":1,"F":V}`, `{"F":V,"zz":1}`, `{"F":V,"L":"x"}`, `{"F":V} {}`, `{"F":V}}`,
		`{"F":V,}`, `{,"F":V}`, `{"F":V "T":"c"}`, `{"F"V}`,
	}
	bodies := make([]string, len(templates))
	for i, tpl := range templates {
		bodies[i] = r.Replace(tpl)
	}
	return bodies
}

// TestLiftVector: decodeLifted takes the vector out of the bodies it
// should (so the fast path is the one the table above checks) and leaves
// the others to the ordinary path.
func TestLiftVector(t *testing.T) {
	bodies := vectorBodies("vector", `[0.5, -1e-3]`)
	for i, body := range bodies {
		var b searchBody
		if ok, want := decodeLifted([]byte(strings.TrimSpace(body)), &b, &b), i < 6; ok != want {
			t.Fatalf("%s: lifted %v, want %v", body, ok, want)
		} else if !ok && !reflect.ValueOf(b).IsZero() {
			t.Fatalf("%s: not lifted, but the body is not left zero: %+v", body, b)
		}
		rest, vec, ok := liftVector([]byte(strings.TrimSpace(body)), "vector")
		if ok && (!sameFloats(vec, []float32{0.5, -1e-3}) || bytes.Contains(rest, []byte("0.5"))) {
			t.Fatalf("%s: lifted %v, rest %s", body, vec, rest)
		}
		if i < 6 && !json.Valid(rest) {
			t.Fatalf("%s: the rest %s is not JSON", body, rest)
		}
	}
}

// sameDecoded compares a today's body with its old twin field by field,
// the vector bit for bit (nil and empty apart).
func sameDecoded(now, old any) bool {
	n, o := reflect.ValueOf(now).Elem(), reflect.ValueOf(old).Elem()
	for i := range n.NumField() {
		nf, of := n.Field(i), o.Field(i)
		if v, ok := nf.Interface().(jsonVector); ok {
			if !sameFloats(v, of.Interface().([]float32)) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(nf.Interface(), of.Interface()) {
			return false
		}
	}
	return true
}

func sameFloats(a, b []float32) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestJSONVectorMatchesEncodingJSON (property, fixed seed): for random
// valid number arrays, written the many ways JSON allows (shortest float32
// and float64 forms, long decimals, exponents, integers, subnormals, values
// at float32's limits, whitespace), jsonVector decodes exactly what
// encoding/json decodes into []float32, through its fast path.
func TestJSONVectorMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for n := range 3000 {
		text := randomNumberArray(rng)
		var want []float32
		if err := json.Unmarshal([]byte(text), &want); err != nil {
			t.Fatalf("case %d: encoding/json refused %.100s: %v", n, text, err)
		}
		if got, ok := parseNumberArray([]byte(text)); !ok || !sameFloats(got, want) {
			t.Fatalf("case %d: %.200s: fast path ok=%v %v, encoding/json %v", n, text, ok, got, want)
		}
		var v jsonVector
		if err := json.Unmarshal([]byte(text), &v); err != nil || !sameFloats(v, want) {
			t.Fatalf("case %d: jsonVector %v (%v), encoding/json %v", n, v, err, want)
		}
	}
}

func randomNumberArray(rng *rand.Rand) string {
	space := func() string { return []string{"", "", "", " ", "\n", "\t ", "\r\n  "}[rng.IntN(7)] }
	var sb strings.Builder
	sb.WriteString(space() + "[" + space())
	count := rng.IntN(40)
	if rng.IntN(20) == 0 {
		count = 1536
	}
	for i := range count {
		if i > 0 {
			sb.WriteString(space() + "," + space())
		}
		sb.WriteString(randomNumber(rng))
	}
	sb.WriteString(space() + "]" + space())
	return sb.String()
}

func randomNumber(rng *rand.Rand) string {
	f32 := math.Float32frombits(rng.Uint32())
	for math.IsNaN(float64(f32)) || math.IsInf(float64(f32), 0) {
		f32 = math.Float32frombits(rng.Uint32())
	}
	f64 := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(74)-40)) // within float32's range
	switch rng.IntN(10) {
	case 0:
		return strconv.FormatFloat(float64(f32), 'g', -1, 32)
	case 1:
		return strconv.FormatFloat(float64(f32), 'e', rng.IntN(25), 64)
	case 2:
		return strconv.FormatFloat(f64, 'g', -1, 64)
	case 3:
		return strings.ToUpper(strconv.FormatFloat(f64, 'e', -1, 64)) // 1.5E+07
	case 4:
		return strconv.FormatFloat(f64, 'f', rng.IntN(30), 64)
	case 5:
		return strconv.FormatInt(rng.Int64()>>rng.IntN(63), 10)
	case 6: // at float32's largest finite value and the smallest subnormals
		return []string{"3.4028235e38", "-3.4028235e38", "3.40282356e38", "1e-45", "-1.4e-45", "7e-46", "1e-46", "-0", "0.0e0", "0E-0"}[rng.IntN(10)]
	case 7: // what a model's embedding looks like
		return strconv.FormatFloat(rng.NormFloat64()/20, 'f', -1, 32)
	case 8: // long decimals that round
		return fmt.Sprintf("0.%d%d%d", rng.Uint64(), rng.Uint64(), rng.Uint64())
	default:
		return strconv.FormatFloat(float64(float32(f64)), 'g', -1, 32)
	}
}

// FuzzJSONVector: for any JSON value, jsonVector decodes what
// encoding/json decodes into []float32, and refuses what it refuses.
func FuzzJSONVector(f *testing.F) {
	for _, seed := range []string{`[]`, `[1,2]`, `null`, `[null]`, `[1e39]`, `["x"]`, ` [ -0 , 1E-2 ] `, `{}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var want []float32
		errWant := json.Unmarshal(data, &want)
		var got jsonVector
		errGot := json.Unmarshal(data, &got)
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("%q: jsonVector error %v, encoding/json %v", data, errGot, errWant)
		}
		if errWant == nil && !sameFloats(got, want) {
			t.Fatalf("%q: jsonVector %v, encoding/json %v", data, got, want)
		}
	})
}

// FuzzVectorBodies: any body decodes into today's add, update and search
// bodies exactly as into the old ones: the same problem, or the same value.
func FuzzVectorBodies(f *testing.F) {
	for _, seed := range append(vectorBodies("vector", `[1, -0.5e-3]`), vectorBodies("embedding", `[null, 1e39]`)...) {
		f.Add(uint8(0), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		pair := bodyPairs[int(kind)%len(bodyPairs)]
		now, old := pair.now(), pair.old()
		pNow, pOld := decodeStrict(body, now, ""), decodeStrict(body, old, "")
		if !reflect.DeepEqual(pNow, pOld) {
			t.Fatalf("%s %q:\n now %+v\n was %+v", pair.name, body, pNow, pOld)
		}
		if pNow == nil && !sameDecoded(now, old) {
			t.Fatalf("%s %q: decoded %+v, was %+v", pair.name, body, now, old)
		}
	})
}
