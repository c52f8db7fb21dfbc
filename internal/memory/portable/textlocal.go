package portable

import "context"

// textConfig is the configuration whose vectors the import stores beside
// its memories, messages, summaries and episodes (migration 19;
// core.State.WriteTextConfig: "" for English), read once per owner.
func (w *ownerWriter) textConfig(ctx context.Context) (string, error) {
	if w.text == nil {
		c, err := w.s.core.WriteTextConfig(ctx, w.tx)
		if err != nil {
			return "", err
		}
		w.text = &c
	}
	return *w.text, nil
}
