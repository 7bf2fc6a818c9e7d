// fleet ui: the live part of the page is replaced whenever the server pushes it again, and
// actions are posted without leaving the page; the answer (or the apiserver's refusal) shows
// in the flash line.
(function () {
  const live = document.getElementById('live');
  const state = document.getElementById('live-state');
  const es = new EventSource('/events?path=' + encodeURIComponent(document.body.dataset.path));
  es.onopen = () => { state.textContent = 'live'; state.className = 'live on'; };
  es.onerror = () => { state.textContent = 'reconnecting'; state.className = 'live off'; };
  es.addEventListener('page', (e) => { live.innerHTML = e.data; });
  document.addEventListener('submit', async (ev) => {
    const form = ev.target;
    if (form.hasAttribute('data-signout')) {
      ev.preventDefault();
      es.close();
      await fetch('/logout', { method: 'POST', headers: { 'X-Fleet-UI': '1' } });
      window.location.assign('/login');
      return;
    }
    if (!form.hasAttribute('data-action')) { return; }
    ev.preventDefault();
    const body = new URLSearchParams(new FormData(form, ev.submitter));
    const flash = document.getElementById('flash');
    try {
      const r = await fetch('/actions', { method: 'POST', body, headers: { 'X-Fleet-UI': '1' } });
      flash.textContent = (await r.text()).trim();
      flash.className = r.ok ? 'ok' : 'bad';
    } catch (err) {
      flash.textContent = 'the UI server cannot be reached: ' + err;
      flash.className = 'bad';
    }
  });
})();
