package hubtest

import (
	"math/rand/v2"
)

// ModulesJSON is the modules.json of a Sentence Transformers model without
// Dense modules.
const ModulesJSON = `[
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
]`

// MultiFormatRepository returns the files of a repository shaped like a
// typical Sentence Transformers model on the hub (the listing of
// sentence-transformers/all-MiniLM-L6-v2): configuration and tokenizer
// files, and the same weights as safetensors, pytorch_model.bin, ONNX
// (full, optimized and quantized), OpenVINO, TensorFlow and Rust. unit is
// the size of one full copy of the weights; the optimized and quantized
// copies are smaller, in the real repository's proportions.
func MultiFormatRepository(unit int) []File {
	r := rand.NewChaCha8([32]byte{7})
	blob := func(size int) []byte {
		data := make([]byte, size)
		_, _ = r.Read(data)
		return data
	}
	text := func(name, content string) File { return File{Name: name, Data: []byte(content)} }
	weights := func(name string, size int) File { return File{Name: name, Data: blob(size), LFS: true} }
	return []File{
		text(".gitattributes", "*.bin filter=lfs diff=lfs merge=lfs -text\n"),
		text("1_Pooling/config.json", `{"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true}`),
		text("README.md", "# all-MiniLM-L6-v2\n"),
		text("config.json", `{"model_type": "bert", "hidden_size": 384, "max_position_embeddings": 512}`),
		text("config_sentence_transformers.json", `{"__version__": {"sentence_transformers": "2.0.0"}}`),
		text("data_config.json", `[]`),
		text("modules.json", ModulesJSON),
		text("sentence_bert_config.json", `{"max_seq_length": 256, "do_lower_case": false}`),
		text("special_tokens_map.json", `{"unk_token": "[UNK]"}`),
		text("tokenizer.json", `{"version": "1.0", "model": {"type": "WordPiece"}}`),
		text("tokenizer_config.json", `{"do_lower_case": true, "padding_side": "right"}`),
		text("train_script.py", "print('train')\n"),
		text("vocab.txt", "[PAD]\n[UNK]\n"),
		weights("model.safetensors", unit),
		weights("pytorch_model.bin", unit),
		weights("tf_model.h5", unit),
		weights("rust_model.ot", unit),
		weights("onnx/model.onnx", unit),
		weights("onnx/model_O1.onnx", unit),
		weights("onnx/model_O2.onnx", unit),
		weights("onnx/model_O3.onnx", unit),
		weights("onnx/model_O4.onnx", unit/2),
		weights("onnx/model_qint8_arm64.onnx", unit/4),
		weights("onnx/model_qint8_avx512.onnx", unit/4),
		weights("onnx/model_quint8_avx2.onnx", unit/4),
		weights("openvino/openvino_model.bin", unit),
		text("openvino/openvino_model.xml", "<net/>"),
		weights("openvino/openvino_model_qint8_quantized.bin", unit/4),
		text("openvino/openvino_model_qint8_quantized.xml", "<net/>"),
	}
}
