// Writes llama.cpp's next-token logits for a text: tokenizes it with the model's own tokenizer
// (no BOS, no special parsing), evaluates all tokens in one batch with an f32 key/value cache on
// one thread, and writes the ids (int32 count, then int32 ids) and the logits (int32 vocabulary,
// then float32 rows, one per position) to the output file.
//   llama_logits <model.gguf> <text file> <output>
#include "llama.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s <model.gguf> <text file> <output>\n", argv[0]);
        return 2;
    }
    std::ifstream input(argv[2], std::ios::binary);
    std::stringstream buffer;
    buffer << input.rdbuf();
    const std::string text = buffer.str();

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (model == nullptr) { std::fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::vector<llama_token> tokens(text.size() + 16);
    const int count = llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), tokens.data(), (int32_t) tokens.size(), false, false);
    if (count <= 0) { std::fprintf(stderr, "tokenization failed (%d)\n", count); return 1; }
    tokens.resize(count);

    llama_context_params params = llama_context_default_params();
    params.n_ctx = params.n_batch = params.n_ubatch = (uint32_t) ((count + 31) / 32 * 32);
    params.n_threads = params.n_threads_batch = 1;
    params.type_k = params.type_v = GGML_TYPE_F32;
    params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * context = llama_init_from_model(model, params);
    if (context == nullptr) { std::fprintf(stderr, "cannot create a context\n"); return 1; }
    llama_batch batch = llama_batch_init(count, 0, 1);
    for (int i = 0; i < count; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = count;
    if (llama_decode(context, batch) != 0) { std::fprintf(stderr, "llama_decode failed\n"); return 1; }

    const int32_t width = llama_vocab_n_tokens(vocab);
    std::FILE * output = std::fopen(argv[3], "wb");
    if (output == nullptr) { std::fprintf(stderr, "cannot write %s\n", argv[3]); return 1; }
    std::fwrite(&count, sizeof count, 1, output);
    std::fwrite(tokens.data(), sizeof(llama_token), count, output);
    std::fwrite(&width, sizeof width, 1, output);
    for (int i = 0; i < count; ++i) std::fwrite(llama_get_logits_ith(context, i), sizeof(float), width, output);
    std::fclose(output);
    llama_batch_free(batch);
    llama_free(context);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
